package testkit

import "os"

// UpdateGoldenEnv, set to 1, makes every golden-file test rewrite its file
// instead of comparing with it: docs/config.md, the formats' bytes, config
// import's YAML. One variable for every generated file, and it works under
// go test ./..., where a flag of one package's tests would not.
const UpdateGoldenEnv = "SPILLWAY_UPDATE_GOLDEN"

// UpdateGolden reports whether UpdateGoldenEnv asks for golden files to be
// rewritten.
func UpdateGolden() bool { return os.Getenv(UpdateGoldenEnv) == "1" }
