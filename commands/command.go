package commands

import "strings"

// cmdCommand answers COMMAND and its subcommands from the table, so client
// libraries and redis-cli see exactly what the dispatcher enforces.
func cmdCommand(d *Dispatcher, c *Client, args [][]byte) {
	if len(args) == 1 {
		c.W.Array(len(d.cmds))
		for _, cmd := range d.cmds {
			writeInfo(c.W, cmd)
		}
		return
	}
	switch strings.ToLower(string(args[1])) {
	case "count":
		c.W.Int(int64(len(d.cmds)))
	case "list":
		c.W.Array(len(d.cmds))
		for _, cmd := range d.cmds {
			c.W.BulkString(cmd.Name)
		}
	case "info":
		c.W.Array(len(args) - 2)
		for _, name := range args[2:] {
			if cmd := d.lookup(name); cmd != nil {
				writeInfo(c.W, cmd)
			} else {
				c.W.NullArray()
			}
		}
	case "docs":
		cmds := d.cmds
		if len(args) > 2 {
			cmds = nil
			for _, name := range args[2:] {
				if cmd := d.lookup(name); cmd != nil {
					cmds = append(cmds, cmd)
				}
			}
		}
		c.W.Map(len(cmds))
		for _, cmd := range cmds {
			c.W.BulkString(cmd.Name)
			writeDocs(c.W, cmd)
		}
	case "getkeys":
		commandGetKeys(d, c, args)
	default:
		c.W.Error("ERR unknown subcommand '" + clip(args[1]) + "'. Try COMMAND HELP.")
	}
}

// writeInfo writes one COMMAND INFO entry in Redis 7's shape: name, arity,
// flags, first key, last key, step, ACL categories, tips, key specs,
// subcommands.
func writeInfo(w Writer, cmd *Command) {
	w.Array(10)
	w.BulkString(cmd.Name)
	w.Int(int64(cmd.Arity))
	var flags []string
	for _, f := range flagNames {
		if cmd.Flags&f.f != 0 {
			flags = append(flags, f.name)
		}
	}
	if cmd.keys != nil {
		flags = append(flags, "movablekeys")
	}
	w.Array(len(flags))
	for _, f := range flags {
		w.Status(f)
	}
	w.Int(int64(cmd.FirstKey))
	w.Int(int64(cmd.LastKey))
	w.Int(int64(cmd.Step))
	w.Array(1)
	w.Status("@" + cmd.Group)
	w.Array(0)
	w.Array(0)
	w.Array(0)
}

func writeDocs(w Writer, cmd *Command) {
	w.Map(5)
	w.BulkString("summary")
	w.BulkString(cmd.Summary)
	w.BulkString("since")
	w.BulkString(cmd.Since)
	w.BulkString("group")
	w.BulkString(cmd.Group)
	w.BulkString("complexity")
	w.BulkString(cmd.Complexity)
	w.BulkString("arguments")
	writeArgs(w, cmd.Args)
}

func writeArgs(w Writer, args []Arg) {
	w.Array(len(args))
	for _, a := range args {
		n := 2
		var flags []string
		if a.Optional {
			flags = append(flags, "optional")
		}
		if a.Multiple {
			flags = append(flags, "multiple")
		}
		if a.Token != "" {
			n++
		}
		if len(flags) > 0 {
			n++
		}
		if len(a.Args) > 0 {
			n++
		}
		w.Map(n)
		w.BulkString("name")
		w.BulkString(a.Name)
		w.BulkString("type")
		w.BulkString(a.Type)
		if a.Token != "" {
			w.BulkString("token")
			w.BulkString(a.Token)
		}
		if len(flags) > 0 {
			w.BulkString("flags")
			w.Array(len(flags))
			for _, f := range flags {
				w.Status(f)
			}
		}
		if len(a.Args) > 0 {
			w.BulkString("arguments")
			writeArgs(w, a.Args)
		}
	}
}

// commandGetKeys is COMMAND GETKEYS command [arg ...], with Redis's errors:
// the keys the routing would hash, in order (redis-py's cluster client asks
// it for commands whose keys move).
func commandGetKeys(d *Dispatcher, c *Client, args [][]byte) {
	if len(args) < 3 {
		c.W.Error("ERR wrong number of arguments for 'command|getkeys' command")
		return
	}
	sub := args[2:]
	cmd := d.lookup(sub[0])
	switch {
	case cmd == nil:
		c.W.Error("ERR Invalid command specified")
		return
	case (cmd.Arity > 0 && len(sub) != cmd.Arity) || (cmd.Arity < 0 && len(sub) < -cmd.Arity):
		c.W.Error("ERR Invalid number of arguments specified for command")
		return
	}
	keys := commandKeys(cmd, sub)
	if len(keys) == 0 {
		c.W.Error("ERR The command has no key arguments")
		return
	}
	c.W.Array(len(keys))
	for _, k := range keys {
		c.W.Bulk(k)
	}
}
