"""The metrics endpoint with a web configuration (`--web-config-file`,
dcgm-exporter's DCGM_EXPORTER_WEB_CONFIG_FILE, the Prometheus
exporter-toolkit's format): TLS scraped by Python's ssl client and parsed by
promtool; plain HTTP and garbage on the TLS port refused while the server
keeps serving; client certificates (RequireAndVerifyClientCert,
client_allowed_sans); a certificate replaced on disk served to the next
connection; basic authentication on every path (right, wrong, missing);
response headers; a key the format lacks, or a broken certificate, is a
config error (exit 2, with file:line:column for the key).  Certificates are
made here with the `cryptography` module; bcrypt hashes with Python's
`crypt` (libxcrypt), or a fixed known one where it is missing."""

import base64
import datetime
import ipaddress
import os
import re
import socket
import ssl
import time
import warnings

import pytest

from devlet_harness import run_devlet, wait_until
from metrics_sim import promtool_check

cryptography = pytest.importorskip("cryptography")
from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

# bcrypt of "correct horse" at cost 4: a fact, for systems without crypt
KNOWN_PASSWORD = "correct horse"
KNOWN_HASH = "$2b$04$sXbBbxpX7su5TnkBWt70zujkCkYte5dMgfkXTD3xA9Qs2ZAfVXwZO"


def bcrypt(password, cost=4):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import crypt
        except ImportError:
            crypt = None
    if crypt is None:
        assert password == KNOWN_PASSWORD
        return KNOWN_HASH
    return crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=2 ** cost))


# ---------------------------------------------------------------- certificates

def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


class Pki:
    """A CA and certificates it signs, written as PEM files under root."""

    def __init__(self, root, prefix=""):
        self.root, self.prefix = root, prefix
        self.ca_key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.utcnow()
        self.ca = (x509.CertificateBuilder().subject_name(_name("devlet test CA"))
                   .issuer_name(_name("devlet test CA")).public_key(self.ca_key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                   .sign(self.ca_key, hashes.SHA256()))
        self.ca_file = _write(os.path.join(root, f"{prefix}ca.pem"),
                              self.ca.public_bytes(serialization.Encoding.PEM))

    def issue(self, name, sans, client=False, signer=None):
        """(cert file, key file) for name with the SANs given (str: DNS, IP, or
        a URI when it has "://")."""
        key = ec.generate_private_key(ec.SECP256R1())
        ca, ca_key = signer or (self.ca, self.ca_key)
        now = datetime.datetime.utcnow()
        alt = []
        for s in sans:
            try:
                alt.append(x509.IPAddress(ipaddress.ip_address(s)))
            except ValueError:
                alt.append(x509.UniformResourceIdentifier(s) if "://" in s else x509.DNSName(s))
        usage = x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH if client else x509.oid.ExtendedKeyUsageOID.SERVER_AUTH
        cert = (x509.CertificateBuilder().subject_name(_name(name)).issuer_name(ca.subject)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.SubjectAlternativeName(alt), critical=False)
                .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
                .sign(ca_key, hashes.SHA256()))
        c = _write(os.path.join(self.root, f"{self.prefix}{name}.pem"),
                   cert.public_bytes(serialization.Encoding.PEM))
        k = _write(os.path.join(self.root, f"{self.prefix}{name}-key.pem"), key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        return c, k


@pytest.fixture
def pki(dirs):
    return Pki(dirs.run)


def web_config(dirs, text, name="web.yml"):
    return _write(os.path.join(dirs.work, name), text.encode())


def start(devlet, web_file=None, env=None):
    args = ["--metrics-address", "127.0.0.1:0", "--kubelet-socket", ""]
    if web_file:
        args += ["--web-config-file", web_file]
    d = devlet(args=args, env=env or {})
    port = int(d.wait_log(r"serving metrics address=\S+ port=(\d+)").group(1))
    return d, port


# ---------------------------------------------------------------- clients

def tls_context(ca_file, cert=None):
    ctx = ssl.create_default_context(cafile=ca_file)
    if cert:
        ctx.load_cert_chain(*cert)
    return ctx


def request(port, path="/metrics", ctx=None, auth=None, timeout=5.0):
    """One GET on a new connection (TLS with ctx): (status, headers, body)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        if ctx:
            s = ctx.wrap_socket(s, server_hostname="localhost")
        head = f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        if auth is not None:
            head += "Authorization: Basic " + base64.b64encode(auth.encode()).decode() + "\r\n"
        s.sendall((head + "\r\n").encode())
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ssl.SSLZeroReturnError:
                break
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    return int(lines[0].split(" ")[1]), headers, body


def raw(port, data, timeout=5.0):
    """Sends data on a plain connection; returns what comes back until the close."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        got = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            got += chunk
        return got
    finally:
        s.close()


def tls_config(cert, key, extra=""):
    return f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n{extra}"


# ---------------------------------------------------------------- TLS

def test_tls_scrape_parses_and_carries_headers(devlet, dirs, pki):
    cert, key = pki.issue("localhost", ["localhost", "127.0.0.1"])
    f = web_config(dirs, tls_config(cert, key) + "http_server_config:\n  http2: true\n  headers:\n"
                   "    X-Content-Type-Options: nosniff\n    Strict-Transport-Security: max-age=60\n")
    d, port = start(devlet, f)
    assert "tls=on basic_auth=off" in d.wait_log(r"serving metrics .*").group(0)
    status, headers, body = request(port, "/metrics", tls_context(pki.ca_file))
    assert status == 200
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Strict-Transport-Security"] == "max-age=60"
    text = body.decode()
    assert "devlet_build_info" in text
    assert len(body) == int(headers["Content-Length"])
    rc, out = promtool_check(text)
    assert rc == 0, out
    assert request(port, "/health", tls_context(pki.ca_file))[0] == 200


def test_plain_http_and_garbage_on_the_tls_port_are_refused(devlet, dirs, pki):
    cert, key = pki.issue("localhost", ["localhost"])
    d, port = start(devlet, web_config(dirs, tls_config(cert, key)))
    got = raw(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert got.startswith(b"HTTP/1.0 400 Bad Request\r\n"), got
    assert b"HTTP request to an HTTPS server" in got
    assert b"devlet_" not in got
    # a handshake record header followed by junk: an alert at most, then the close
    got = raw(port, b"\x16\x03\x01\x00\x10" + os.urandom(16) + b"\x00" * 64)
    assert b"HTTP/" not in got
    assert raw(port, b"\x16", timeout=15) == b""  # a client that stops half-way: the deadline ends it
    # a client that does not trust the server's CA fails its own handshake
    with pytest.raises(ssl.SSLError):
        request(port, "/metrics", ssl.create_default_context())
    for _ in range(3):
        assert request(port, "/metrics", tls_context(pki.ca_file))[0] == 200
    assert d.alive()


def test_mtls_require_and_verify(devlet, dirs, pki):
    cert, key = pki.issue("localhost", ["localhost"])
    good = pki.issue("scraper", ["scraper.example"], client=True)
    other = pki.issue("intruder", ["intruder.example"], client=True)
    rogue = Pki(dirs.run, "rogue-").issue("scraper", ["scraper.example"], client=True)  # another CA
    f = web_config(dirs, tls_config(cert, key, f"  client_auth_type: RequireAndVerifyClientCert\n"
                                    f"  client_ca_file: {pki.ca_file}\n"
                                    f"  client_allowed_sans: [scraper.example]\n"))
    d, port = start(devlet, f)
    assert request(port, "/metrics", tls_context(pki.ca_file, good))[0] == 200
    for who in (None, other, rogue):
        with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError, IndexError, ValueError)):
            # TLS 1.3: the refusal may arrive as the first read
            request(port, "/metrics", tls_context(pki.ca_file, who))
    assert request(port, "/metrics", tls_context(pki.ca_file, good))[0] == 200


def served_serial(pki, port):
    """The serial number of the certificate the endpoint serves now."""
    s = tls_context(pki.ca_file).wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5),
                                             server_hostname="localhost")
    try:
        return x509.load_der_x509_certificate(s.getpeercert(binary_form=True)).serial_number
    finally:
        s.close()


def test_certificate_replaced_on_disk_is_served_to_the_next_connection(devlet, dirs, pki):
    cert, key = pki.issue("localhost", ["localhost"])
    d, port = start(devlet, web_config(dirs, tls_config(cert, key)))

    first = served_serial(pki, port)
    new_cert, new_key = pki.issue("localhost2", ["localhost"])
    os.replace(new_key, key)
    os.replace(new_cert, cert)
    wanted = x509.load_pem_x509_certificate(open(cert, "rb").read()).serial_number
    assert wanted != first
    wait_until(lambda: served_serial(pki, port) == wanted, 5, "the new certificate")


def test_env_var_names_the_web_config(devlet, dirs, pki):
    cert, key = pki.issue("localhost", ["localhost"])
    f = web_config(dirs, tls_config(cert, key))
    d, port = start(devlet, env={"DCGM_EXPORTER_WEB_CONFIG_FILE": f})
    assert request(port, "/health", tls_context(pki.ca_file))[0] == 200
    assert raw(port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n").startswith(b"HTTP/1.0 400")


# ---------------------------------------------------------------- basic auth

def test_basic_auth_on_every_path(devlet, dirs):
    f = web_config(dirs, f"basic_auth_users:\n  alice: '{bcrypt('s3cret')}'\n"
                   f"  bob: '{bcrypt(KNOWN_PASSWORD)}'\n")
    d, port = start(devlet, f)
    assert "tls=off basic_auth=on" in d.wait_log(r"serving metrics .*").group(0)
    for path in ("/metrics", "/health", "/ready", "/nowhere"):
        status, headers, _ = request(port, path)
        assert status == 401, path
        assert headers["WWW-Authenticate"] == "Basic"
    for wrong in ("alice:wrong", "alice:", "mallory:s3cret", "alice", "bob:s3cret"):
        assert request(port, "/metrics", auth=wrong)[0] == 401, wrong
    status, _, body = request(port, "/metrics", auth="alice:s3cret")
    assert status == 200 and b"devlet_build_info" in body
    assert request(port, "/health", auth=f"bob:{KNOWN_PASSWORD}")[0] == 200
    # a verified password is remembered: later requests are not bcrypt-bound
    t0 = time.monotonic()
    for _ in range(20):
        assert request(port, "/health", auth="alice:s3cret")[0] == 200
    assert time.monotonic() - t0 < 10
    assert request(port, "/metrics", auth="alice:s3cretX")[0] == 401
    # a malformed Authorization value is a 401, two of them a 400
    assert raw(port, b"GET /metrics HTTP/1.1\r\nConnection: close\r\nAuthorization: Basic !!!\r\n\r\n").startswith(b"HTTP/1.1 401")
    twice = b"Authorization: Basic " + base64.b64encode(b"alice:s3cret") + b"\r\n"
    assert raw(port, b"GET /metrics HTTP/1.1\r\n" + twice * 2 + b"\r\n").startswith(b"HTTP/1.1 400")


def test_basic_auth_over_tls(devlet, dirs, pki):
    cert, key = pki.issue("localhost", ["localhost"])
    f = web_config(dirs, tls_config(cert, key) + f"basic_auth_users:\n  alice: '{bcrypt('pw')}'\n")
    d, port = start(devlet, f)
    ctx = tls_context(pki.ca_file)
    assert request(port, "/metrics", ctx)[0] == 401
    assert request(port, "/metrics", ctx, auth="alice:nope")[0] == 401
    status, _, body = request(port, "/metrics", ctx, auth="alice:pw")
    assert status == 200
    rc, out = promtool_check(body.decode())
    assert rc == 0, out


# ---------------------------------------------------------------- config errors

def run_exit(dirs, *args, env=None):
    return run_devlet(["run", "--metrics-address", "127.0.0.1:0", "--kubelet-socket", "",
                       "--plugin-directory", dirs.plugins, *args],
                      env={"GFD_OUTPUT_FILE": os.path.join(dirs.work, "gfd"),
                           "DEVLET_CDI_SPEC_DIR": os.path.join(dirs.work, "cdi"), **(env or {})},
                      timeout=20)


def test_unknown_key_is_exit_2_with_its_position(dirs):
    f = web_config(dirs, "tls_server_config:\n  cert_file: a.pem\n  kye_file: b.pem\n")
    r = run_exit(dirs, "--web-config-file", f)
    assert r.returncode == 2, r.stderr
    assert f"{f}:3:3:" in r.stderr and 'unknown key "kye_file"' in r.stderr
    f = web_config(dirs, "basic_auth_users:\n  alice: plaintext\n", "plain.yml")
    r = run_exit(dirs, env={"DCGM_EXPORTER_WEB_CONFIG_FILE": f})
    assert r.returncode == 2 and f"{f}:2:10:" in r.stderr and "bcrypt" in r.stderr, r.stderr
    f = web_config(dirs, "tls_server_config:\n  cert_file: a.pem\n  key_file: b.pem\n"
                   "  client_auth_type: RequireClientCert\n", "auth.yml")
    r = run_exit(dirs, "--web-config-file", f)
    assert r.returncode == 2 and f"{f}:4:21:" in r.stderr, r.stderr
    r = run_exit(dirs, "--web-config-file", os.path.join(dirs.work, "missing.yml"))
    assert r.returncode == 2 and "missing.yml" in r.stderr, r.stderr


def test_broken_certificate_is_exit_2(dirs, pki):
    cert, key = pki.issue("localhost", ["localhost"])
    broken = _write(os.path.join(dirs.run, "broken.pem"), b"-----BEGIN CERTIFICATE-----\nnope\n")
    f = web_config(dirs, tls_config(broken, key))
    r = run_exit(dirs, "--web-config-file", f)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "broken.pem" in r.stdout + r.stderr
    _, other_key = pki.issue("other", ["other"])
    r = run_exit(dirs, "--web-config-file", web_config(dirs, tls_config(cert, other_key), "mismatch.yml"))
    assert r.returncode == 2 and "mismatch" in r.stdout + r.stderr, r.stdout + r.stderr


def test_reload_applies_a_changed_web_config_and_refuses_a_broken_one(devlet, dirs, pki):
    f = web_config(dirs, f"basic_auth_users:\n  alice: '{bcrypt('one')}'\n")
    d, port = start(devlet, f)
    assert request(port, "/health", auth="alice:one")[0] == 200
    web_config(dirs, f"basic_auth_users:\n  bob: '{bcrypt('two')}'\n")
    since = os.path.getsize(d.log_path)
    d.sighup()
    port = int(d.wait_log(r"serving metrics address=\S+ port=(\d+)", since).group(1))
    assert request(port, "/health", auth="alice:one")[0] == 401
    assert request(port, "/health", auth="bob:two")[0] == 200
    # a certificate that does not load: the reload is refused, bob still gets in
    broken = _write(os.path.join(dirs.run, "broken.pem"), b"not a certificate\n")
    _, key = pki.issue("localhost", ["localhost"])
    web_config(dirs, tls_config(broken, key))
    since = os.path.getsize(d.log_path)
    d.sighup()
    d.wait_log(r"reload failed, keeping the running configuration .*broken\.pem", since)
    assert request(port, "/health", auth="bob:two")[0] == 200


# ---------------------------------------------------------------- files that are no regular files

@pytest.mark.parametrize("which", ["cert_file", "key_file", "client_ca_file"])
def test_fifo_as_a_tls_file_is_exit_2(dirs, pki, which):
    """A FIFO (never opened for writing) as a TLS file: OpenSSL's blocking
    fopen of it hung the start for ever; now it is a config error naming
    it, as a broken certificate is."""
    cert, key = pki.issue("localhost", ["localhost"])
    fifo = os.path.join(dirs.run, f"{which}.pem")
    os.mkfifo(fifo)
    files = {"cert_file": cert, "key_file": key, "client_ca_file": pki.ca_file, which: fifo}
    f = web_config(dirs, tls_config(files["cert_file"], files["key_file"],
                                    "  client_auth_type: RequireAndVerifyClientCert\n"
                                    f"  client_ca_file: {files['client_ca_file']}\n"))
    r = run_exit(dirs, "--web-config-file", f)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{which} {fifo}: not a regular file" in r.stdout + r.stderr, r.stdout + r.stderr


def test_tls_file_replaced_by_a_fifo_keeps_the_served_one(devlet, dirs, pki):
    """The certificate replaced on disk by a FIFO that never gets a writer,
    then the key by a directory, while serving: the next connections get
    the pair already loaded (the endpoint's thread used to block in
    OpenSSL's fopen of the FIFO), each failure is logged once, naming the
    file, and a real pair put back is served."""
    cert, key = pki.issue("localhost", ["localhost"])
    d, port = start(devlet, web_config(dirs, tls_config(cert, key)))

    def refused(what, path, why, since):
        assert served_serial(pki, port) == first
        d.wait_log(r"TLS files not reloaded, serving the previous ones error=\"[^\"]*"
                   + re.escape(f"{what} {path}: {why}"), since)
        for _ in range(3):
            assert request(port, "/health", tls_context(pki.ca_file))[0] == 200
        assert d.log_text()[since:].count("TLS files not reloaded") == 1

    first = served_serial(pki, port)
    since = os.path.getsize(d.log_path)
    os.unlink(cert)
    os.mkfifo(cert)
    refused("cert_file", cert, "not a regular file", since)

    new_cert, new_key = pki.issue("localhost2", ["localhost"])
    since = os.path.getsize(d.log_path)
    os.unlink(cert)
    os.replace(new_cert, cert)
    os.unlink(key)
    os.mkdir(key)
    refused("key_file", key, "Is a directory", since)

    os.rmdir(key)
    os.replace(new_key, key)
    wanted = x509.load_pem_x509_certificate(open(cert, "rb").read()).serial_number
    wait_until(lambda: served_serial(pki, port) == wanted, 5, "the new certificate")
    assert d.alive()
