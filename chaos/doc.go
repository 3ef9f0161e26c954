// Package chaos is the fault-injection harness for delayd's cluster mode.
package chaos
