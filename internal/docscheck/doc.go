// Package docscheck holds no code, only a test run by `make test`: every
// repository path that README.md or a page of docs/ names, and every
// relative link in them (with its #anchor), must exist, so that the docs
// cannot point at a file that was moved or deleted.
package docscheck
