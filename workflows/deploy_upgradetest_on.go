//go:build upgradetest

package workflows

// upgradeTestBuild: this is the live upgrade test's build B.
const upgradeTestBuild = true
