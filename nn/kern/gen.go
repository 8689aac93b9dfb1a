package kern

// The amd64 kernels are generated with avo (github.com/mmcloughlin/avo) by
// the program in internal/asmgen, a module of its own so that avo is not a
// dependency of Refinery. Both generated files are committed.
//go:generate go run -C internal/asmgen . -out ../../kern_amd64.s -stubs ../../stubs_amd64.go -pkg kern
