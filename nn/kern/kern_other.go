//go:build !amd64 || purego

package kern

// archLevels returns levels unchanged: without amd64 assembly (other
// architectures, or -tags purego) only the portable kernels exist.
func archLevels(levels map[Level]impl) map[Level]impl { return levels }
