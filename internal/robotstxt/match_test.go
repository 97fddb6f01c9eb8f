package robotstxt

import (
	"testing"

	"github.com/jimsmart/grobotstxt"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		path, pattern string
		want          bool
	}{
		{"/a/b", "/a", true},
		{"/a/b", "", true},
		{"/a", "/a/b", false},
		{"/a", "/a$", true},
		{"/a/", "/a$", false},
		{"/a$b", "/a$b", true},
		{"/a.php", "/*.php$", true},
		{"/a.php.bak", "/*.php$", false},
		{"/a.php/x.php", "/*.php$", true},
		{"/x/y/z", "/*/*/z", true},
		{"/x/z", "/*/*/z", false},
		{"/abcabc", "/*abc$", true},
		{"/ab", "/*abc$", false},
		{"/", "$", false},
		{"/", "*", true},
		{"/", "**$", true},
		{"/ab", "/a**b", true},
		{"/fish", "fish", false},
	}
	for _, tt := range tests {
		if got := match(tt.path, tt.pattern); got != tt.want {
			t.Errorf("match(%q, %q) = %v, want %v", tt.path, tt.pattern, got, tt.want)
		}
	}
}

// FuzzMatch compares the pattern matcher with the one of Google's parser.
func FuzzMatch(f *testing.F) {
	f.Add("/a/b.php", "/*.php$")
	f.Add("/abcabc", "/*abc$")
	f.Add("/x$", "/x$$")
	f.Add("/a/b/c", "/a*b*c*")
	f.Fuzz(func(t *testing.T, path, pattern string) {
		if got, want := match(path, pattern), grobotstxt.Matches(path, pattern); got != want {
			t.Fatalf("match(%q, %q) = %v, Google's matcher says %v", path, pattern, got, want)
		}
	})
}
