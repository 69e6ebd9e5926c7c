// Package bench compares this project's runner with River
// (github.com/riverqueue/river), the PostgreSQL job queue for Go, on one
// throwaway PostgreSQL: the same posters, a no-op agent or worker, 4
// runners or clients. It is a module of its own, so that River stays out
// of the library's go.mod. The figures and the commands that make them
// are in BENCH.md.
package bench
