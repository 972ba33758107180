//go:build !upgradetest

package lease

// upgradeTestBuild is true only in the deliberately changed build the live
// upgrade test (worker/upgrade_test.go) starts as "build B": go build
// -tags upgradetest. Release builds never have it.
const upgradeTestBuild = false
