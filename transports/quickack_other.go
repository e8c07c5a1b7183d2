//go:build !linux

package transports

import "net"

// quickAck is Linux-only (TCP_QUICKACK); elsewhere connections are used as
// they are.
func quickAck(nc net.Conn) net.Conn { return nc }
