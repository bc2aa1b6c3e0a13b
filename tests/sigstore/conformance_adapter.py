#!/usr/bin/env python3
"""sigstore-conformance adapter for hubkern-sigstore-verify (test helper, not installed).

Two roles:

* As the suite's ``--entrypoint`` (run as a script): maps the conformance CLI protocol
  (docs/cli_protocol.md of sigstore-conformance) onto hubkern-sigstore-verify. ``verify-bundle``
  with ``--certificate-identity``/``--certificate-oidc-issuer`` or with ``--key`` (a managed
  key) is supported, message-signature and DSSE (in-toto) bundles alike (``--dsse``);
  ``sign-bundle`` exits 3 ("unsupported"). The tool is taken from $HK_SIGSTORE_VERIFY.

* As a pytest plugin (``-p conformance_adapter``): makes the suite runnable offline. The suite's
  ``client`` fixture always downloads an OIDC test token (used only for signing); this replaces
  ``urllib3.request`` before the suite's conftest imports it, so the token is a local unsigned
  JWT and no request leaves the machine.
"""

import base64
import json
import os
import sys
import time

UNSUPPORTED = 3


def _b64(obj):
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


class _FakeResponse:
    def __init__(self, data):
        self.data = data


def _offline_request(method, url, *args, **kwargs):
    if "sigstore-conformance-testing-token" not in url:
        raise RuntimeError(f"conformance run is offline; refused request to {url}")
    payload = {
        "email": "offline@hubkern.invalid",
        "iss": "https://hubkern.invalid/offline",
        "exp": int(time.time()) + 3600,
    }
    return _FakeResponse(f"{_b64({'alg': 'none'})}.{_b64(payload)}.".encode())


def main(argv):
    tool = os.environ.get("HK_SIGSTORE_VERIFY")
    if not tool:
        print("HK_SIGSTORE_VERIFY is not set", file=sys.stderr)
        return 2
    if not argv or argv[0] != "verify-bundle":
        print(f"unsupported command: {argv[:1]}", file=sys.stderr)
        return UNSUPPORTED
    out = ["--dsse"]  # the conformance entry point verifies in-toto DSSE bundles too
    i = 1
    while i < len(argv):
        a = argv[i]
        if a in ("--bundle", "--certificate-identity", "--certificate-oidc-issuer",
                 "--trusted-root", "--key") and i + 1 < len(argv):
            out += [a, argv[i + 1]]
            i += 2
            continue
        if a == "--staging":
            out.append(a)
        elif a.startswith("--"):
            print(f"unsupported flag: {a}", file=sys.stderr)
            return UNSUPPORTED
        else:
            out.append(a)
        i += 1
    os.execv(tool, [tool, "verify-bundle", *out])
    return 2  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
else:
    import urllib3

    urllib3.request = _offline_request
