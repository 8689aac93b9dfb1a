// Package plural writes counts in English: "1 bandit", "2 bandits".
package plural

import "fmt"

// Word returns one when n is 1, else many.
func Word[N ~int | ~int64](n N, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Count returns n followed by one or many: "1 row", "3 rows".
func Count[N ~int | ~int64](n N, one, many string) string {
	return fmt.Sprintf("%d %s", n, Word(n, one, many))
}
