// Package repo holds tests of the repository itself: every package has a
// package comment, and the outpost binary links only the dependencies
// the project chose.
package repo
