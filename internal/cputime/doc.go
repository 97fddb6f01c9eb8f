// Package cputime reads the CPU time the process has used, for benchmarks
// that report it per operation (cpu-ns/op): on a busy machine the CPU time
// per operation is a steadier measure than the wall time, which includes
// waiting for a core.
package cputime
