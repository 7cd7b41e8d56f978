package config

import "unicode/utf8"

// levenshtein is the edit distance between a and b, in runes: the number of
// insertions, deletions and substitutions that turn one into the other.
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// nearest returns the candidate closest to s, if it is close enough to be a
// plausible typo: at most max(2, len(s)/3) edits, and at most half of
// s's length (so "foo" suggests nothing rather than "log"). A wild guess is
// worse than none, because it sends the user to the wrong key.
func nearest(s string, candidates []string) (string, bool) {
	best, bestD := "", -1
	for _, c := range candidates {
		if d := levenshtein(s, c); bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	n := utf8.RuneCountInString(s)
	if bestD < 0 || bestD > max(2, n/3) || 2*bestD > n {
		return "", false
	}
	return best, true
}
