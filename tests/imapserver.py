"""A real IMAP server for tests: Debian's dovecot (package `dovecot-imapd`), one per test.

The fixture never uses a dovecot that happens to run on the machine (the package's own service
listens on port 143 with /etc/dovecot). It writes its own configuration into a fresh temp
directory (sockets, state, mail and log all inside it), starts `dovecot -F -c <conf>` in its own
process group, listening only on 127.0.0.1 on a free port, with one plain-text user; teardown
kills the whole process group and removes the directory.

Works as root (login processes run as `dovenull`, auth as `dovecot`, mail as `mail`) and as an
ordinary user (everything runs as that user; the login/anvil chroots are off for that reason).
The configuration is dovecot 2.3 syntax (Debian 12); 2.4 changed most of these settings, so the
fixture skips on other versions.
"""

from __future__ import annotations

import contextlib
import email.parser
import grp
import imaplib
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from desk.process import die_with_parent, free_port

SKIP_REASON = "dovecot not installed: the IMAP test needs Debian's dovecot-imapd package"


class ImapServerError(RuntimeError):
    pass


class _PortTaken(ImapServerError):
    pass


def dovecot_binary() -> str | None:
    """The installed dovecot master binary, or None."""
    found = shutil.which("dovecot")
    if found:
        return found
    fallback = Path("/usr/sbin/dovecot")
    return str(fallback) if fallback.is_file() and os.access(fallback, os.X_OK) else None


def dovecot_version(binary: str) -> str:
    """`dovecot --version`, e.g. "2.3.19.1 (9b53102964)"."""
    answer = subprocess.run(
        [binary, "--version"], capture_output=True, text=True, timeout=10, check=False
    )
    return answer.stdout.strip()


@dataclass(frozen=True)
class StoredMessage:
    """One message as the server holds it."""

    uid: int
    message_id: str | None
    flags: tuple[str, ...]

    @property
    def seen(self) -> bool:
        return "\\Seen" in self.flags


@dataclass(frozen=True)
class _Identities:
    """Which system users dovecot's processes run as, and who owns the mail."""

    login_user: str
    internal_user: str
    internal_group: str
    mail_uid: int
    mail_gid: int


def _identities() -> _Identities:
    if os.geteuid() != 0:
        # Rootless: dovecot runs every process as the invoking user.
        me = pwd.getpwuid(os.geteuid())
        group = grp.getgrgid(os.getegid()).gr_name
        return _Identities(me.pw_name, me.pw_name, group, me.pw_uid, me.pw_gid)
    # As root: imap-login refuses to run as root and userdb may not return uid 0, so use the
    # package's unprivileged users (dovenull, dovecot) and the system `mail` user.
    login = _first_user("dovenull", "nobody")
    internal = _first_user("dovecot", "nobody")
    mail = _first_user("mail", "nobody")
    return _Identities(
        login_user=login.pw_name,
        internal_user=internal.pw_name,
        internal_group=grp.getgrgid(internal.pw_gid).gr_name,
        mail_uid=mail.pw_uid,
        mail_gid=mail.pw_gid,
    )


def _first_user(*names: str) -> pwd.struct_passwd:
    for name in names:
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise ImapServerError(f"none of the users {names} exists")


class ImapServer:
    """One dovecot IMAP server on 127.0.0.1 with a single user and a maildir in a temp dir."""

    def __init__(
        self,
        *,
        user: str = "desk",
        password: str = "desk-imap-pw",
        host: str = "127.0.0.1",
        binary: str | None = None,
    ) -> None:
        self.host = host
        self.port = 0
        self.user = user
        self.password = password
        self.binary = binary or dovecot_binary()
        self.root: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def log_file(self) -> Path:
        if self.root is None:
            raise ImapServerError("server not started")
        return self.root / "dovecot.log"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 15.0, attempts: int = 3) -> None:
        """Start dovecot and wait until a LOGIN + SELECT INBOX works.

        Retries on a fresh port if another process grabbed the chosen one in between. (Dovecot
        retries a busy port silently for 5 s before it logs the clash and exits, so that rare
        race costs 5 s.)
        """
        if self.binary is None:
            raise ImapServerError(SKIP_REASON)
        if self.proc is not None:
            raise ImapServerError("server already started")
        for attempt in range(1, attempts + 1):
            try:
                self._launch()
                self._wait_ready(timeout)
            except BaseException as error:
                tail = self.log_tail()
                self.stop()
                if not isinstance(error, ImapServerError):
                    raise
                if isinstance(error, _PortTaken) and attempt < attempts:
                    continue
                raise ImapServerError(f"{error}\n--- tail of dovecot.log ---\n{tail}") from None
            else:
                return

    def stop(self, timeout: float = 10.0) -> None:
        """Kill dovecot's whole process group, then remove the temp directory.

        SIGTERM goes to every process, not just the master: a master-only SIGTERM makes
        dovecot take a full second to shut down; the group is gone in milliseconds this way.
        SIGKILL follows for anything that lingers.
        """
        if self.proc is not None:
            group = self.proc.pid  # start_new_session: the master leads its own group
            _signal_group(group, signal.SIGTERM)
            try:
                self.proc.wait(timeout / 2)
            except subprocess.TimeoutExpired:
                _signal_group(group, signal.SIGKILL)
                self.proc.wait()
            if not _group_gone(group, timeout=timeout / 2):
                _signal_group(group, signal.SIGKILL)
                if not _group_gone(group, timeout=timeout / 2):
                    raise ImapServerError(f"dovecot processes of group {group} survive SIGKILL")
            self.proc = None
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def log_tail(self, lines: int = 30) -> str:
        if self.root is None or not self.log_file.exists():
            return "(no log)"
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])

    def _launch(self) -> None:
        assert self.binary is not None
        ids = _identities()
        # Not pytest's tmp_path: its root is mode 0700, which the unprivileged dovecot
        # processes cannot traverse, and its long paths overflow the 108-byte limit on unix
        # socket names that dovecot creates under base_dir.
        self.root = Path(tempfile.mkdtemp(prefix="imapd-"))
        self.root.chmod(0o755)
        home = self.root / "home" / self.user
        home.mkdir(parents=True)
        if os.geteuid() == 0:
            os.chown(home, ids.mail_uid, ids.mail_gid)
        passwd = self.root / "passwd"
        passwd.write_text(f"{self.user}:{{PLAIN}}{self.password}::::::\n")
        passwd.chmod(0o644)
        self.port = free_port(self.host)
        conf = self.root / "dovecot.conf"
        conf.write_text(self.config(ids))
        # Configuration errors go to stderr before dovecot opens log_path: same file, appended.
        with open(self.log_file, "ab") as log:
            self.proc = subprocess.Popen(
                [self.binary, "-F", "-c", str(conf)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )

    def config(self, ids: _Identities) -> str:
        assert self.root is not None
        root = self.root
        return f"""\
protocols = imap
listen = {self.host}
base_dir = {root}/run
state_dir = {root}/state
instance_name = imapd-test-{self.port}
log_path = {root}/dovecot.log
auth_verbose = yes
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
default_login_user = {ids.login_user}
default_internal_user = {ids.internal_user}
default_internal_group = {ids.internal_group}
first_valid_uid = {ids.mail_uid}
first_valid_gid = {ids.mail_gid}
mail_location = maildir:~/Maildir
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/passwd
}}
userdb {{
  driver = static
  args = uid={ids.mail_uid} gid={ids.mail_gid} home={root}/home/%u
}}
service anvil {{
  chroot =
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = {self.host}
    port = {self.port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
"""

    def _wait_ready(self, timeout: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        last_error = "no attempt"
        while time.monotonic() < deadline:
            if "Address already in use" in self.log_tail():
                raise _PortTaken(f"port {self.port} is taken")
            if self.proc.poll() is not None:
                raise ImapServerError(f"dovecot exited with {self.proc.returncode}")
            if "Fatal:" in self.log_tail():
                # dovecot keeps restarting a failing service with back-off; it will not recover
                raise ImapServerError("a dovecot service failed to start")
            try:
                # LOGIN alone is not proof: dovecot answers "OK Logged in, but initialization
                # failed" and then drops the connection when the mail side is broken.
                with self.connect(timeout=1.0) as imap:
                    status, data = imap.select("INBOX")
                if status != "OK":
                    raise imaplib.IMAP4.error(f"SELECT INBOX: {data!r}")
                return
            except (OSError, imaplib.IMAP4.error) as error:
                last_error = f"{type(error).__name__}: {error}"
            time.sleep(0.05)
        raise ImapServerError(f"dovecot not ready after {timeout:.0f}s ({last_error})")

    # -- client helpers -------------------------------------------------------------------

    @contextlib.contextmanager
    def connect(self, timeout: float = 5.0) -> Iterator[imaplib.IMAP4]:
        """A logged-in stdlib IMAP client; logs out on exit."""
        imap = imaplib.IMAP4(self.host, self.port, timeout=timeout)
        try:
            imap.login(self.user, self.password)
            yield imap
        finally:
            with contextlib.suppress(OSError, imaplib.IMAP4.error):
                imap.logout()

    def append(self, raw_message: bytes, mailbox: str = "INBOX") -> None:
        """Deliver `raw_message` into `mailbox` (created if missing), unflagged (not \\Seen)."""
        with self.connect() as imap:
            if mailbox.upper() != "INBOX":
                imap.create(mailbox)  # NO if it exists; APPEND below reports real failures
            status, data = imap.append(mailbox, None, None, raw_message)
            if status != "OK":
                raise ImapServerError(f"APPEND to {mailbox} failed: {data!r}")

    def messages(self, mailbox: str = "INBOX") -> list[StoredMessage]:
        """Every message in `mailbox` with its flags, read without changing any of them."""
        found: list[StoredMessage] = []
        with self.connect() as imap:
            status, data = imap.select(mailbox, readonly=True)
            if status != "OK":
                raise ImapServerError(f"EXAMINE {mailbox} failed: {data!r}")
            _, uids = imap.uid("SEARCH", "ALL")
            for uid in uids[0].split():
                _, flag_data = imap.uid("FETCH", uid, "(FLAGS)")
                _, header_data = imap.uid("FETCH", uid, "(BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)])")
                if _gone(flag_data) or _gone(header_data):
                    continue  # moved out (expunged) since the SEARCH: the poller's quarantine
                flags = imaplib.ParseFlags(_first_bytes(flag_data))
                headers = email.parser.BytesHeaderParser().parsebytes(_literal(header_data))
                message_id = headers.get("Message-ID")
                found.append(
                    StoredMessage(
                        uid=int(uid),
                        message_id=str(message_id).strip() if message_id else None,
                        flags=tuple(flag.decode() for flag in flags),
                    )
                )
        return found

    def seen_flags(self, mailbox: str = "INBOX") -> dict[str, bool]:
        """Message-ID -> whether the message is \\Seen.

        Messages without a Message-ID are keyed "uid:<n>"; for duplicate Message-IDs the last
        one wins (use `messages()` to see every copy).
        """
        return {
            message.message_id or f"uid:{message.uid}": message.seen
            for message in self.messages(mailbox)
        }


def _gone(data: list[object]) -> bool:
    """A UID FETCH of a message expunged meanwhile answers OK with nothing."""
    return all(item is None for item in data)


def _first_bytes(data: list[object]) -> bytes:
    for item in data:
        if isinstance(item, bytes):
            return item
        if isinstance(item, tuple) and item and isinstance(item[0], bytes):
            return item[0]
    raise ImapServerError(f"unexpected FETCH answer {data!r}")


def _literal(data: list[object]) -> bytes:
    for item in data:
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], bytes):
            return item[1]
    raise ImapServerError(f"no literal in FETCH answer {data!r}")


def _signal_group(group: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, sig)


def _group_members(group: int) -> list[int]:
    """Live (non-zombie) processes of a process group, from /proc."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            # "pid (comm) state ppid pgrp ..." and comm may contain spaces or parentheses
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if fields[0] != "Z" and int(fields[2]) == group:
                members.append(int(stat.parent.name))
    return members


def _group_gone(group: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _group_members(group):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


_VERSION = re.compile(r"^2\.3\.")


@pytest.fixture
def imap_server() -> Iterator[ImapServer]:
    """A started dovecot with user `desk` / `desk-imap-pw`; skipped if dovecot is missing."""
    binary = dovecot_binary()
    if binary is None:
        pytest.skip(SKIP_REASON)
    version = dovecot_version(binary)
    if not _VERSION.match(version):
        pytest.skip(f"dovecot {version or '?'} found; this fixture writes 2.3 configuration")
    server = ImapServer(binary=binary)
    server.start()
    try:
        yield server
    finally:
        server.stop()
