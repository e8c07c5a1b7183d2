package serve

import (
	"fmt"
	"net"
	"strconv"
	"time"
)

// Systemd is how the daemon talks to the service manager that supervises it.
// The zero value talks to nobody.
type Systemd struct {
	// NotifySocket is $NOTIFY_SOCKET: a unixgram socket path, or an abstract
	// socket name starting with '@'. Empty disables sd_notify.
	NotifySocket string
	// Watchdog is $WATCHDOG_USEC as a duration. The daemon sends WATCHDOG=1
	// every Watchdog/2 while its scheduler loop is alive. Zero disables it.
	Watchdog time.Duration
}

// SystemdFromEnv reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID through
// getenv (os.Getenv in main). The watchdog is ignored when WATCHDOG_PID names
// another process than pid or WATCHDOG_USEC does not parse; nothing here fails.
func SystemdFromEnv(getenv func(string) string, pid int) Systemd {
	sd := Systemd{NotifySocket: getenv("NOTIFY_SOCKET")}
	usec, err := strconv.ParseInt(getenv("WATCHDOG_USEC"), 10, 64)
	if err != nil || usec <= 0 {
		return sd
	}
	if p := getenv("WATCHDOG_PID"); p != "" && p != strconv.Itoa(pid) {
		return sd
	}
	sd.Watchdog = time.Duration(usec) * time.Microsecond
	return sd
}

// Notify sends one sd_notify datagram such as "READY=1" or "WATCHDOG=1". It
// does nothing and returns nil when NotifySocket is empty; it returns a
// wrapped dial or write error otherwise.
func (s Systemd) Notify(state string) error {
	if s.NotifySocket == "" {
		return nil
	}
	name := s.NotifySocket
	if name[0] == '@' {
		name = "\x00" + name[1:] // Linux abstract namespace
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("sd_notify %s: %w", s.NotifySocket, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify %s: %w", s.NotifySocket, err)
	}
	return nil
}
