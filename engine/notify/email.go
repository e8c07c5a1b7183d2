package notify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/contractd/contractd/contracts"
	"github.com/contractd/contractd/engine/clock"
	"github.com/contractd/contractd/transports"
)

// Email sends each message as one mail through an SMTP server (net/smtp):
// STARTTLS before anything is sent (tls: starttls, the default; a server
// that does not offer it is refused), TLS from the first byte (tls: tls),
// or plain text to a relay (tls: none). With a username it logs in with
// AUTH PLAIN, or LOGIN when the server offers only that, the password read
// at send time from the environment variable or file the route names, and
// never over an unencrypted connection to another host.
//
// The subject is the message line (what the log notifier writes, without
// its time); the body repeats it with the message's fields, so a mail
// filter can sort on headers alone (X-Contractd-Contract, -Kind, -Agent,
// -Severity). The Message-ID is derived from the message, so a retry of
// a mail the server had taken after all is recognisably the same mail.
//
// Each attempt has a timeout for the whole conversation (default 10s);
// connection errors and 4xx answers are retried (retries, default 2) with
// a backoff that doubles (backoff, default 1s); a 5xx answer (an unknown
// recipient, a failed login) wraps ErrRejected and is never retried. The
// password never appears in an error.
type Email struct {
	name     string
	server   string // host:port
	host     string
	from     *mail.Address
	to       []*mail.Address
	mode     string // starttls, tls or none
	roots    *x509.CertPool
	username string
	password password
	timeout  time.Duration
	retries  int
	backoff  time.Duration
	hello    string // the name we give in EHLO
	pageURL  string
	clock    clock.Clock
}

var _ Notifier = (*Email)(nil)

func newEmail(r contracts.NotifyRoute, deps Deps) (Notifier, error) {
	o := r.Options.(*contracts.EmailOptions)
	e := &Email{name: r.Name, server: o.Server, mode: o.TLS, username: o.Username,
		password: password{file: o.PasswordFile}, timeout: o.Timeout, retries: o.Retries, backoff: o.Backoff,
		hello: "localhost", pageURL: strings.TrimRight(deps.PageURL, "/"), clock: deps.Clock}
	if o.PasswordEnv != "" {
		e.password.env = envVar{opt: "password_env", name: o.PasswordEnv, getenv: deps.Getenv}
	}
	if e.clock == nil {
		e.clock = clock.UTC{}
	}
	var err error
	if e.host, _, err = net.SplitHostPort(o.Server); err != nil {
		return nil, fmt.Errorf("%w: server %q: %v", ErrConfig, o.Server, err)
	}
	if e.from, err = mail.ParseAddress(o.From); err != nil {
		return nil, fmt.Errorf("%w: from %q: %v", ErrConfig, o.From, err)
	}
	if e.to, err = mail.ParseAddressList(o.To); err != nil {
		return nil, fmt.Errorf("%w: to %q: %v", ErrConfig, o.To, err)
	}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: ca_file: %v", ErrConfig, err)
		}
		e.roots = x509.NewCertPool()
		if !e.roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: ca_file %s: no PEM certificate in it", ErrConfig, o.CAFile)
		}
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		e.hello = h
	}
	if e.timeout <= 0 || e.backoff <= 0 || e.retries < 0 {
		return nil, fmt.Errorf("%w: timeout and backoff must be positive, retries at least 0", ErrConfig)
	}
	return e, nil
}

// Name returns the notifier's name.
func (e *Email) Name() string { return e.name }

// Notify sends m as one mail to every recipient. It returns an error when
// the server did not take it after the retries, naming the server and the
// step of the conversation that failed (with the server's answer),
// wrapping ErrRejected for a 5xx answer and ErrMissingSecret when the
// password is not there.
func (e *Email) Notify(ctx context.Context, m Message) error {
	pass := ""
	if e.username != "" {
		var err error
		if pass, err = e.password.get(); err != nil {
			return err
		}
	}
	msg := e.Compose(m)
	last, gaveUp := retry(ctx, e.retries, e.backoff, func() error { return e.once(ctx, msg, pass) })
	var err error
	switch {
	case last == nil:
		return nil
	case gaveUp != nil:
		err = fmt.Errorf("smtp %s: %w (gave up waiting to retry after: %v)", e.server, gaveUp, last)
	default:
		// How many attempts it took is the Delivery's to say (Attempts).
		err = fmt.Errorf("smtp %s: %w", e.server, last)
	}
	return poster{secrets: []string{pass}}.scrub(err)
}

// once holds one SMTP conversation that sends msg, within the route's
// timeout.
func (e *Email) once(ctx context.Context, msg []byte, pass string) (err error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	step := "connect"
	defer func() {
		if err != nil {
			err = e.judge(ctx, step, err)
		}
	}()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", e.server)
	if err != nil {
		return err
	}
	defer conn.Close()
	// net/smtp takes no context: the deadline, and a cancel, reach the
	// conversation through the connection.
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if e.mode == "tls" {
		step = "tls handshake"
		tc := tls.Client(conn, e.tlsConfig())
		if err := tc.HandshakeContext(ctx); err != nil {
			return err
		}
		conn = tc
	}
	step = "greeting"
	c, err := smtp.NewClient(conn, e.host)
	if err != nil {
		return err
	}
	defer c.Close()
	step = "EHLO"
	if err := c.Hello(e.hello); err != nil {
		return err
	}
	if e.mode == "starttls" {
		step = "STARTTLS"
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return errors.New("the server does not offer STARTTLS; nothing was sent (tls: none sends mail in the clear)")
		}
		if err := c.StartTLS(e.tlsConfig()); err != nil {
			return err
		}
	}
	if e.username != "" {
		step = "AUTH"
		ok, mechs := c.Extension("AUTH")
		if !ok {
			return errors.New("the server offers no AUTH (is it the submission port, and is the login offered only after STARTTLS?)")
		}
		var auth smtp.Auth
		switch fields := strings.Fields(strings.ToUpper(mechs)); {
		case slices.Contains(fields, "PLAIN"):
			auth = smtp.PlainAuth("", e.username, pass, e.host)
		case slices.Contains(fields, "LOGIN"):
			auth = &loginAuth{user: e.username, pass: pass, host: e.host}
		default:
			return fmt.Errorf("the server offers AUTH %s; contractd logs in with PLAIN or LOGIN", mechs)
		}
		if err := c.Auth(auth); err != nil {
			return err
		}
	}
	step = "MAIL FROM"
	if err := c.Mail(e.from.Address); err != nil {
		return err
	}
	for _, to := range e.to {
		step = "RCPT TO " + to.Address
		if err := c.Rcpt(to.Address); err != nil {
			return err
		}
	}
	step = "DATA"
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	step = "QUIT"
	// The mail is taken once DATA is answered: a failed QUIT is no
	// reason to send it again.
	_ = c.Quit()
	return nil
}

// judge turns what went wrong at step into the error Notify returns: a
// 5xx answer wraps ErrRejected (never retried), a 4xx answer and a broken
// or timed-out connection are errRetry, and what another attempt in this
// run cannot mend (a certificate the route does not trust, a server that
// offers no STARTTLS) is neither, so the message waits for a later run.
func (e *Email) judge(ctx context.Context, step string, err error) error {
	var te *textproto.Error
	var cert *tls.CertificateVerificationError
	switch {
	case errors.As(err, &te) && te.Code >= 500:
		return fmt.Errorf("%s: %d %s: %w", step, te.Code, transports.Printable(te.Msg), ErrRejected)
	case errors.As(err, &te):
		return errRetry{err: fmt.Errorf("%s: %d %s", step, te.Code, transports.Printable(te.Msg))}
	case errors.As(err, &cert):
		return fmt.Errorf("%s: %w (ca_file names the certificates to trust)", step, err)
	case errors.Is(ctx.Err(), context.Canceled):
		return fmt.Errorf("%s: %w", step, context.Canceled)
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || isTimeout(err):
		return errRetry{err: fmt.Errorf("%s: timed out after %s: %w", step, e.timeout, context.DeadlineExceeded)}
	case step == "STARTTLS" || step == "AUTH" && !isNetError(err):
		return fmt.Errorf("%s: %w", step, err)
	}
	return errRetry{err: fmt.Errorf("%s: %w", step, err)}
}

func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}

// isTimeout reports whether err is a connection's deadline passing: the
// attempt's, set on the connection, which may pass a moment before its
// context says so.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (e *Email) tlsConfig() *tls.Config {
	return &tls.Config{ServerName: e.host, RootCAs: e.roots, MinVersion: tls.VersionTLS12}
}

// Compose renders m as the mail the route sends, headers and body, with
// CRLF line ends.
func (e *Email) Compose(m Message) []byte {
	at := m.Time
	if at.IsZero() {
		at = e.clock.Now()
	}
	line := m.Line()
	subject := line
	if r := []rune(subject); len(r) > 200 {
		subject = string(r[:200]) + "…"
	}
	to := make([]string, len(e.to))
	for i, a := range e.to {
		to[i] = a.String()
	}
	id := sha256.Sum256([]byte(strings.Join([]string{m.Contract, m.Agent, m.Condition, m.Kind, m.Text, at.UTC().Format(time.RFC3339Nano)}, "\x00")))
	domain := e.from.Address[strings.LastIndex(e.from.Address, "@")+1:]

	var b bytes.Buffer
	header := func(name, value string) {
		fmt.Fprintf(&b, "%s: %s\r\n", name, value)
	}
	word := func(s string) string { return mime.QEncoding.Encode("utf-8", transports.Printable(s)) }
	header("From", e.from.String())
	header("To", strings.Join(to, ", "))
	// An encoded subject is several encoded words: one per folded line,
	// so no header line is longer than a mail reader expects.
	header("Subject", strings.ReplaceAll(word(subject), "?= =?", "?=\r\n =?"))
	header("Date", at.Format(time.RFC1123Z))
	header("Message-ID", "<"+hex.EncodeToString(id[:16])+".contractd@"+domain+">")
	header("Auto-Submitted", "auto-generated")
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	header("Content-Transfer-Encoding", "quoted-printable")
	header("X-Contractd-Contract", word(m.Contract))
	header("X-Contractd-Kind", word(m.Kind))
	if m.Agent != "" {
		header("X-Contractd-Agent", word(m.Agent))
	}
	if m.Severity != "" {
		header("X-Contractd-Severity", word(m.Severity))
	}
	b.WriteString("\r\n")

	var body strings.Builder
	body.WriteString(line + "\n\n")
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(&body, "%-10s %s\n", name+":", transports.Printable(value))
		}
	}
	field("contract", m.Contract)
	field("agent", m.Agent)
	field("condition", m.Condition)
	field("kind", m.Kind)
	field("severity", m.Severity)
	field("time", at.UTC().Format(time.RFC3339))
	if !m.OpenedAt.IsZero() {
		field("opened", m.OpenedAt.UTC().Format(time.RFC3339))
	}
	if e.pageURL != "" {
		field("status", e.pageURL+"/c/"+m.Contract)
	}
	qp := quotedprintable.NewWriter(&b)
	qp.Write([]byte(strings.ReplaceAll(body.String(), "\n", "\r\n")))
	qp.Close()
	b.WriteString("\r\n")
	return b.Bytes()
}

// password is a route's SMTP password, read when a message is sent: from
// the environment variable password_env names, or the file password_file
// names (its first line).
type password struct {
	env  envVar
	file string
}

// get returns the password, or an error wrapping ErrMissingSecret that
// names where it was looked for (never a value).
func (p password) get() (string, error) {
	if p.file == "" {
		return p.env.get()
	}
	b, err := os.ReadFile(p.file)
	if err != nil {
		return "", fmt.Errorf("password_file: %w: %w", ErrMissingSecret, err)
	}
	pass, _, _ := strings.Cut(string(b), "\n")
	pass = strings.TrimSuffix(pass, "\r")
	if pass == "" {
		return "", fmt.Errorf("password_file: %s is empty: %w", p.file, ErrMissingSecret)
	}
	return pass, nil
}

// loginAuth is AUTH LOGIN, which some servers offer instead of PLAIN:
// the username and the password, each sent when the server asks. Like
// net/smtp's PLAIN, it refuses to send them unencrypted to anything but
// localhost.
type loginAuth struct {
	user, pass, host string
	step             int
}

func (a *loginAuth) Start(s *smtp.ServerInfo) (string, []byte, error) {
	if !s.TLS && s.Name != "localhost" && s.Name != "127.0.0.1" && s.Name != "::1" {
		return "", nil, errors.New("unencrypted connection")
	}
	if s.Name != a.host {
		return "", nil, errors.New("wrong host name")
	}
	a.step = 0
	return "LOGIN", nil, nil
}

func (a *loginAuth) Next(_ []byte, more bool) ([]byte, error) {
	if !more {
		return nil, nil
	}
	a.step++
	switch a.step {
	case 1:
		return []byte(a.user), nil
	case 2:
		return []byte(a.pass), nil
	}
	return nil, errors.New("the server asked for more than a username and a password")
}
