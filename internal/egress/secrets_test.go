package egress_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cubicle-sandbox/cubicle/internal/egress"
	"github.com/cubicle-sandbox/cubicle/internal/sandbox"
)

// The secret values of TestDomainSecrets: none may ever be seen inside
// the computer or in a record.
const (
	secretValue = "Bearer sk-cubicle-test-9f2c51d7e0"
	wildValue   = "wild-8a7d3c1e55"
)

// TestDomainSecrets: requests to a domain with secrets get them as headers,
// added by Cubicle behind TLS it intercepts with the computer's own CA;
// every other domain is spliced (the client sees the real server's
// certificate); the computer never holds a value.
func TestDomainSecrets(t *testing.T) {
	w := newWorld(t, nil)
	sb := w.computer(t, sandbox.InternetPolicy{
		Domains: []string{"secret.test", "spliced.test", "*.secrets.test", "untrusted.test"},
		Secrets: []sandbox.DomainSecret{
			{Domain: "secret.test", Name: "authorization", Value: secretValue},
			{Domain: "*.secrets.test", Name: "X-Api-Key", Value: wildValue},
			{Domain: "untrusted.test", Name: "X-Api-Key", Value: wildValue},
		},
	})
	expect := func(t *testing.T, r result, want ...string) {
		t.Helper()
		for _, s := range want {
			if !strings.Contains(r.out, s) {
				t.Errorf("got exit %d, stdout %q, stderr %q; want %q", r.ExitCode, r.out, r.err, s)
			}
		}
	}
	curl := func(args ...string) []string {
		return append([]string{"curl", "-sS", "--max-time", "10"}, args...)
	}
	// The test internet's own CA, for clients that check the spliced
	// server's certificate (it is no secret).
	run(t, sb, "sh", "-c", `printf '%s' "$1" > /workspace/testca.pem`, "sh", string(w.in.CAPEM))

	t.Run("the computer trusts its CA bundle", func(t *testing.T) {
		expect(t, run(t, sb, "sh", "-c", `stat -c '%a %U' `+sandbox.CABundleFile+`; grep -c 'BEGIN CERTIFICATE' `+sandbox.CABundleFile+`; echo $SSL_CERT_FILE $CURL_CA_BUNDLE $REQUESTS_CA_BUNDLE $NODE_EXTRA_CA_CERTS`),
			"644 root\n", sandbox.CABundleFile+" "+sandbox.CABundleFile+" "+sandbox.CABundleFile+" "+sandbox.CABundleFile)
	})
	t.Run("its system trust store has the computer's CA too", func(t *testing.T) {
		// The host's bundle plus the computer's CA, read-only; clients that
		// read no variable (here curl and Python with them unset) trust it.
		host, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Count(string(host), "BEGIN CERTIFICATE") + 1
		expect(t, run(t, sb, "sh", "-c", `grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt; echo x >> /etc/ssl/certs/ca-certificates.crt || echo read-only`),
			strconv.Itoa(want)+"\n", "read-only\n")
		unset := []string{"env", "-u", "SSL_CERT_FILE", "-u", "CURL_CA_BUNDLE", "-u", "REQUESTS_CA_BUNDLE"}
		expect(t, run(t, sb, append(unset, curl("--noproxy", "*", "https://secret.test/")...)...), "Authorization: "+secretValue)
		expect(t, run(t, sb, append(unset, python, "-c", `import urllib.request as u; print(u.build_opener(u.ProxyHandler({})).open("https://secret.test/", timeout=10).read().decode())`)...),
			"Authorization: "+secretValue)
	})
	t.Run("curl and python get the header added, direct and through the proxy", func(t *testing.T) {
		echo := "Authorization: " + secretValue
		expect(t, run(t, sb, curl("--noproxy", "*", "https://secret.test/")...), "host secret.test tls true", echo)
		expect(t, run(t, sb, curl("https://secret.test/hello?x=1")...), echo)
		// The request's own header is replaced, not added to.
		r := run(t, sb, curl("--noproxy", "*", "-H", "Authorization: Bearer mine", "https://secret.test/")...)
		expect(t, r, echo)
		if strings.Contains(r.out, "mine") {
			t.Errorf("the computer's own Authorization reached the server: %q", r.out)
		}
		py := `import urllib.request as u, sys
o = u.build_opener(u.ProxyHandler({})) if sys.argv[2] == "direct" else u.build_opener()
print(o.open(u.Request(sys.argv[1], data=b"a body", headers={"X-Mine": "1"}), timeout=10).read().decode())`
		expect(t, run(t, sb, python, "-c", py, "https://secret.test/", "direct"), echo, "X-Mine: 1", "Content-Length: 6")
		expect(t, run(t, sb, python, "-c", py, "https://secret.test/", "proxy"), echo)
		expect(t, run(t, sb, python, "-c", py, "https://api.secrets.test/", "direct"), "X-Api-Key: "+wildValue)
		// Several requests on one connection each get it.
		r = run(t, sb, curl("--noproxy", "*", "https://secret.test/1", "https://secret.test/2")...)
		if strings.Count(r.out, echo) != 2 {
			t.Errorf("two requests on one connection: %q %q", r.out, r.err)
		}
	})
	t.Run("the intercepted certificate is the computer's CA's, the spliced one the server's", func(t *testing.T) {
		// secret.test is intercepted: the test CA alone does not verify it.
		if r := run(t, sb, curl("--noproxy", "*", "--cacert", "/workspace/testca.pem", "https://secret.test/")...); r.ExitCode != 60 {
			t.Errorf("secret.test with the test CA only: exit %d %q (want 60: not the server's certificate)", r.ExitCode, r.err)
		}
		// spliced.test is not: the server's own chain, the test CA's.
		r := run(t, sb, curl("--noproxy", "*", "--cacert", "/workspace/testca.pem", "https://spliced.test/")...)
		expect(t, r, "host spliced.test tls true")
		if strings.Contains(r.out, "Authorization") || strings.Contains(r.out, secretValue) {
			t.Errorf("spliced.test got a secret: %q", r.out)
		}
		if r := run(t, sb, curl("--noproxy", "*", "https://spliced.test/")...); r.ExitCode != 60 {
			t.Errorf("spliced.test with the computer's bundle: exit %d %q (want 60: the test CA is not in it)", r.ExitCode, r.err)
		}
		expect(t, run(t, sb, "sh", "-c", "openssl s_client -connect spliced.test:443 -servername spliced.test </dev/null 2>/dev/null | grep -m1 '^issuer'"),
			"Cubicle test internet CA")
		expect(t, run(t, sb, "sh", "-c", "openssl s_client -connect secret.test:443 -servername secret.test </dev/null 2>/dev/null | grep -m1 '^issuer'"),
			"Cubicle computer "+sb.ID()+" CA")
	})
	t.Run("no secret over cleartext", func(t *testing.T) {
		r := run(t, sb, curl("--noproxy", "*", "http://secret.test/")...)
		expect(t, r, "host secret.test tls false")
		if strings.Contains(r.out, "Authorization") {
			t.Errorf("plain HTTP got the secret: %q", r.out)
		}
	})
	t.Run("a request naming another host on an intercepted connection is refused", func(t *testing.T) {
		expect(t, run(t, sb, curl("--noproxy", "*", "-w", "%{http_code}", "-H", "Host: spliced.test", "https://secret.test/")...),
			"this connection is for secret.test, not spliced.test\n421")
	})
	t.Run("the real server's certificate is verified by Cubicle", func(t *testing.T) {
		expect(t, run(t, sb, curl("--noproxy", "*", "-w", "%{http_code}", "https://untrusted.test/")...),
			"cubicle: cannot reach untrusted.test over verified TLS", "502")
	})
	t.Run("the value is nowhere in the computer", func(t *testing.T) {
		for _, v := range []string{secretValue, wildValue, "sk-cubicle-test"} {
			r := run(t, sb, "sh", "-c", `env; cat /proc/self/environ; grep -rl "$1" /workspace /tmp /etc /home /run /proc/self/environ 2>/dev/null | sed 's/^/found in /'; echo done`, "sh", v)
			if strings.Contains(r.out, v) || strings.Contains(r.out, "found in") || !strings.Contains(r.out, "done") {
				t.Errorf("the value %q is visible in the computer: %q", v, r.out)
			}
		}
	})
	t.Run("records say intercepted, never a value", func(t *testing.T) {
		if len(w.log.find(func(r egress.Record) bool {
			return r.Name == "secret.test" && r.Intercepted && r.Verdict == egress.Allowed && r.Sent > 0 && r.Received > 0
		})) == 0 {
			t.Error("no intercepted record for secret.test")
		}
		if len(w.log.find(func(r egress.Record) bool { return r.Name == "spliced.test" && r.Intercepted })) != 0 {
			t.Error("spliced.test was intercepted")
		}
		if len(w.log.find(func(r egress.Record) bool { return r.Rule == "fronting:spliced.test" && r.Intercepted })) == 0 {
			t.Error("no fronting record for the intercepted connection")
		}
		if len(w.log.find(func(r egress.Record) bool {
			return r.Name == "untrusted.test" && r.Verdict == egress.Failed && strings.Contains(r.Error, "upstream TLS")
		})) == 0 {
			t.Error("no failed record for untrusted.test")
		}
		all := fmt.Sprintf("%+v", w.log.find(func(egress.Record) bool { return true }))
		if strings.Contains(all, "sk-cubicle") || strings.Contains(all, wildValue) {
			t.Error("a record holds a secret value")
		}
	})
}

// TestDomainSecretsRefused: a secret for a domain the policy does not
// allow, or a header that frames the request, is refused at create.
func TestDomainSecretsRefused(t *testing.T) {
	w := newWorld(t, nil)
	for _, c := range []struct {
		pol  sandbox.InternetPolicy
		want string
	}{
		{sandbox.InternetPolicy{Domains: []string{"secret.test"}, Secrets: []sandbox.DomainSecret{{Domain: "other.test", Name: "X-Key", Value: "v"}}}, "does not allow"},
		{sandbox.InternetPolicy{Domains: []string{"secrets.test"}, Secrets: []sandbox.DomainSecret{{Domain: "*.secrets.test", Name: "X-Key", Value: "v"}}}, "does not allow"},
		{sandbox.InternetPolicy{Domains: []string{"secret.test"}, Secrets: []sandbox.DomainSecret{{Domain: "secret.test", Name: "Host", Value: "v"}}}, "cannot be set"},
		{sandbox.InternetPolicy{Domains: []string{"secret.test"}, Secrets: []sandbox.DomainSecret{{Domain: "secret.test", Name: "X-Key", Value: "a\r\nb"}}}, "control characters"},
	} {
		spec := sandbox.DefaultSpec()
		spec.DiskBytes, spec.Network, spec.Internet = 64<<20, sandbox.NetworkInternet, c.pol
		sb, err := w.d.Create(t.Context(), spec)
		if err == nil {
			sb.Destroy(t.Context())
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.pol, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "a\r\nb") {
			t.Errorf("the error shows the value: %v", err)
		}
	}
}
