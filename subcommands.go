package main

import "io"

// subcommands are the verbs that run instead of a server (`delayd check-log
// --dir d`): offline tools and clients of a running server. Each takes the
// arguments after its name and returns the exit status: 0 done, 1 failed,
// 2 bad usage. One line per verb; its code lives in its own file.
var subcommands = map[string]func(args []string, stderr io.Writer) int{
	"check-log":    checkLog,
	"backup":       backupCmd,
	"restore":      restoreCmd,
	"check-backup": checkBackup,
	"export":       exportCmd,
	"import":       importCmd,
}
