//go:build upgradetest

package lease

// upgradeTestBuild: this is the live upgrade test's build B.
const upgradeTestBuild = true
