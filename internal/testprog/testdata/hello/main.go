// Command hello prints its arguments, for the test of BuildBinary.
package main

import (
	"fmt"
	"os"
	"strings"
)

func main() { fmt.Println("hello", strings.Join(os.Args[1:], " ")) }
