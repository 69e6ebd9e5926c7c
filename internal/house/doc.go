// Package house holds the tests of the repository's shape: the top level
// is the design card plus cmd/ and internal/, the public packages are the
// library and stay small, the library and the command link no test
// library, imports run downwards only, no function is over 120 lines, and
// the docs stay short enough to read. It has no code of its own.
package house
