#!/usr/bin/env python3
"""gpuplane under a real Prometheus (docs/observability.md).

Checks the alert rules (`promtool check rules`, `promtool test rules`), then starts the demo as
`make run` does (scripts/run.sh, its own data directory and port, TLS) and:
  - lints /metrics and /metrics/hardware with `promtool check metrics`: any finding fails;
  - starts Prometheus on 127.0.0.1, scraping both over TLS with a bearer token;
  - queries the series back through Prometheus's HTTP API: every node and GPU of the demo fleet
    is there under the DCGM names, with the tenant holding it;
  - runs every query of every dashboard in deploy/grafana (variables at their "All" value) and
    requires each to return data.
Usage: prometheus_test.py SOURCE_DIR GPUPLANE_BINARY
"""
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

SRC, BIN = os.path.realpath(sys.argv[1]), os.path.realpath(sys.argv[2])
WORK = tempfile.mkdtemp(prefix="gp-prom-")
procs = []


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def finish():
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    shutil.rmtree(WORK, ignore_errors=True)


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    for log in ("run.out", "data/server.log", "data/agents.log", "prometheus.log"):
        path = os.path.join(WORK, log)
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                print(f"--- {log} (tail)\n" + "".join(f.readlines()[-20:]), file=sys.stderr)
    finish()
    sys.exit(1)


def run(argv, cwd=None, stdin=None):
    return subprocess.run(argv, cwd=cwd, input=stdin, capture_output=True, text=True)


def wait_for(what, predicate, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    fail(f"{what} within {seconds} s")


# ---- the rules ----
rules = os.path.join(SRC, "deploy/prometheus/gpuplane-alerts.yml")
r = run(["promtool", "check", "rules", rules])
if r.returncode != 0:
    fail(f"promtool check rules:\n{r.stdout}{r.stderr}")
r = run(["promtool", "test", "rules", "alerts_test.yml"], cwd=os.path.join(SRC, "tests/observe"))
if r.returncode != 0:
    fail(f"promtool test rules:\n{r.stdout}{r.stderr}")

# ---- the demo, as `make run` starts it ----
port = free_port()
env = dict(os.environ, GPUPLANE_DATA=f"{WORK}/data", GPUPLANE_LISTEN=f"127.0.0.1:{port}",
           GPUPLANE_CONFIG=f"{WORK}/none")
for k in ("GPUPLANE_ENDPOINT", "GPUPLANE_TOKEN", "GPUPLANE_CA_FILE"):
    env.pop(k, None)
out = open(f"{WORK}/run.out", "w")
procs.append(subprocess.Popen(["scripts/run.sh", BIN], cwd=SRC, env=env, stdout=out,
                              stderr=subprocess.STDOUT, start_new_session=True))
wait_for("run.sh says the demo is up",
         lambda: "Stop with Ctrl-C" in open(f"{WORK}/run.out").read(), 90)
endpoint = f"https://127.0.0.1:{port}"
ca = f"{WORK}/data/tls/ca.pem"
token = re.search(r"^api_key: (\S+)", open(f"{WORK}/data/admin-credential").read(), re.M).group(1)
tls = ssl.create_default_context(cafile=ca)


def scrape(path):
    req = urllib.request.Request(endpoint + path, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, context=tls, timeout=10) as resp:
        return resp.read().decode()


# Every demo GPU reports telemetry with its agent's first heartbeats.
hardware = wait_for("every demo GPU's power in /metrics/hardware",
                    lambda: (lambda t: t if t.count("DCGM_FI_DEV_POWER_USAGE{") >= 36 else None)(
                        scrape("/metrics/hardware")), 60)
for path, text in (("/metrics", scrape("/metrics")), ("/metrics/hardware", hardware)):
    r = run(["promtool", "check", "metrics"], stdin=text)
    if r.returncode != 0 or r.stdout.strip() or r.stderr.strip():
        fail(f"promtool check metrics on {path}:\n{r.stdout}{r.stderr}")

# ---- Prometheus, scraping both ----
with open(f"{WORK}/token", "w") as f:
    f.write(token)
prom_port = free_port()
scrape_common = {
    "scheme": "https",
    "scrape_interval": "1s",
    "authorization": {"credentials_file": f"{WORK}/token"},
    "tls_config": {"ca_file": ca},
    "static_configs": [{"targets": [f"127.0.0.1:{port}"]}],
}
config = {"scrape_configs": [dict(scrape_common, job_name="gpuplane", metrics_path="/metrics"),
                             dict(scrape_common, job_name="gpuplane-hardware",
                                  metrics_path="/metrics/hardware")]}
with open(f"{WORK}/prometheus.yml", "w") as f:
    json.dump(config, f)  # JSON is YAML
plog = open(f"{WORK}/prometheus.log", "w")
procs.append(subprocess.Popen(
    ["prometheus", f"--config.file={WORK}/prometheus.yml", f"--storage.tsdb.path={WORK}/tsdb",
     f"--web.listen-address=127.0.0.1:{prom_port}"],
    stdout=plog, stderr=subprocess.STDOUT, start_new_session=True))


def query(expr):
    url = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            body = json.load(resp)
    except Exception as e:  # Prometheus not up yet, or a 400 for a bad query
        return {"error": str(e)}
    return body


def series(expr):
    body = query(expr)
    return body.get("data", {}).get("result") if body.get("status") == "success" else None


wait_for("both scrape jobs up",
         lambda: (lambda s: s is not None and len(s) == 2 and all(x["value"][1] == "1" for x in s))(
             series("up")), 60)
# A few scrapes, so that range functions have points.
time.sleep(5)

power = series("DCGM_FI_DEV_POWER_USAGE")
if not power or len(power) != 36:
    fail(f"expected 36 GPUs' power through Prometheus, got {power and len(power)}")
nodes = {s["metric"]["node"] for s in series("gpuplane_node_info")}
if nodes != {"a100-a", "a100-b", "h200-a", "h200-b", "h200-dedicated"}:
    fail(f"expected the five demo nodes in gpuplane_node_info, got {sorted(nodes)}")
held = series('DCGM_FI_DEV_FB_USED{tenant="acme"}')
if not held or any(s["metric"].get("allocation", "") == "" for s in held):
    fail("the demo tenant acme's GPUs carry no allocation label")
if series('gpuplane_nodes{state="ready"} == 5') in (None, []):
    fail("gpuplane_nodes does not count five ready nodes")
# What the certificate and audit alerts read: the server verified its trail at start, its
# certificate is in date, and each demo agent holds a node certificate.
if series("gpuplane_audit_chain_ok == 1") in (None, []):
    fail("no intact audit verification in gpuplane_audit_chain_ok")
if series("gpuplane_tls_certificate_expiry_timestamp_seconds > time()") in (None, []):
    fail("gpuplane_tls_certificate_expiry_timestamp_seconds is missing or in the past")
node_certs = series("gpuplane_node_certificate_expiry_timestamp_seconds > time()")
if not node_certs or len(node_certs) != 5:
    fail(f"expected 5 nodes' certificate expiries, got {node_certs and len(node_certs)}")

# ---- every dashboard query returns data ----
checked = 0
for name in sorted(os.listdir(os.path.join(SRC, "deploy/grafana"))):
    dashboard = json.load(open(os.path.join(SRC, "deploy/grafana", name)))
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    # Template variables at their "All" value; label_values(selector, label) as its selector.
    for v in dashboard.get("templating", {}).get("list", []):
        q = v.get("query")
        if isinstance(q, dict):
            m = re.fullmatch(r"label_values\((.*), *\w+\)", q["query"])
            if not m:
                fail(f"{name}: variable {v['name']} is not label_values(selector, label)")
            exprs.append(m.group(1))
    for expr in exprs:
        concrete = re.sub(r"\$\{?(tenant|job)\}?", ".*", expr)
        body = query(concrete)
        if body.get("status") != "success":
            fail(f"{name}: {expr!r} failed: {body}")
        if not body["data"]["result"]:
            fail(f"{name}: {expr!r} returned no data")
        checked += 1
if checked < 20:
    fail(f"only {checked} dashboard queries found")
print(f"ok: rules tested, metrics lint-clean, {len(power)} GPUs scraped, "
      f"{checked} dashboard queries returned data")
finish()
