// Package archtest holds tests of the tree's shape rather than of its
// behaviour: which packages may import which. It has no code of its own.
package archtest
