//go:build unix

package commands

import (
	"strconv"
	"syscall"
)

// cpuInfo is INFO cpu: the process's and its children's CPU time, in
// seconds with microseconds, as Redis's getrusage fields. Redis's
// *_main_thread fields are left out: the Go runtime moves a connection's
// work between threads, and no thread is the main one.
func cpuInfo() [][2]string {
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	tv := func(t syscall.Timeval) string {
		us := strconv.FormatInt(int64(t.Usec), 10)
		for len(us) < 6 {
			us = "0" + us
		}
		return strconv.FormatInt(int64(t.Sec), 10) + "." + us
	}
	return [][2]string{
		{"used_cpu_sys", tv(self.Stime)},
		{"used_cpu_user", tv(self.Utime)},
		{"used_cpu_sys_children", tv(children.Stime)},
		{"used_cpu_user_children", tv(children.Utime)},
	}
}
