#!/usr/bin/env bash
# Checks the nightly sweep's launchers with the tools their users run, after proving that each
# check rejects a deliberately broken input:
#   - .github/workflows/*.yml: actionlint, with ShellCheck on every `run:` block;
#   - deploy/kubernetes/*.yaml: kubernetes-validate --strict against the Kubernetes 1.29 schemas
#     (the oldest release with backoffLimitPerIndex on by default) and 1.33 (where it is GA),
#     and ShellCheck on the bash each Job runs;
#   - deploy/container/Containerfile: hadolint, and every workspace member and carried crate
#     ([patch] paths, vendor/) copied in;
#   - one shard count: `shards` in ci/nightly.toml = completions = parallelism of the Indexed Job
#     = SHARDS in every Job (read with tomllib and PyYAML, never grep);
#   - the glue, run for real against stub ci/ scripts that record how they were called: each
#     Job's bash as its pods run it, and the workflow's plan, cache-key, shard, merge and history
#     steps;
#   - the definition and the scripts the launchers call exist.
# The tools are pinned wheels from PyPI in a virtualenv under QSIM_CACHE_DIR
# (ci/lib/pytools.sh), installed on the first run; later runs take a few seconds.
#
#   bash ci/tests/launchers.sh      exit 0: every check passed; 1: one failed (printed FAIL)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
# shellcheck source=ci/lib/pytools.sh
source ci/lib/pytools.sh
qsim_pytools
bin=$QSIM_PYTOOLS_BIN
K8S_VERSIONS=(1.29.0 1.33.0)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

passed=0
failed=0
pass() {
  printf 'ok    %s\n' "$*"
  passed=$((passed + 1))
}
# fail DESCRIPTION [OUTPUT]: the output (a tool's answer) is printed indented under it.
fail() {
  printf 'FAIL  %s\n' "$1"
  if [[ -n "${2:-}" ]]; then printf '%s\n' "$2" | sed 's/^/      /'; fi
  failed=$((failed + 1))
}
# Runs "$@", keeping its output in $out and its exit status in $status.
run() {
  status=0
  out=$("$@" 2>&1) || status=$?
}
# Runs a check that prints its own ok/FAIL lines (the Python below) and counts them.
counted() {
  run "$@"
  if [[ -n "$out" ]]; then printf '%s\n' "$out"; fi
  passed=$((passed + $(grep -c '^ok ' <<<"$out" || true)))
  failed=$((failed + $(grep -c '^FAIL ' <<<"$out" || true)))
  if ((status != 0)) && ! grep -q '^FAIL ' <<<"$out"; then
    failed=$((failed + 1))
    echo "FAIL  $1 $2 exited $status without saying why"
  fi
}

actionlint() { "$bin/actionlint" -no-color -shellcheck "$bin/shellcheck" -pyflakes= "$@"; }
hadolint() { "$bin/hadolint" --no-color --failure-threshold style "$@"; }
shellcheck() { "$bin/shellcheck" --shell=bash --severity=style "$@"; }
kubernetes_validate() { "$bin/kubernetes-validate" --strict --quiet "$@"; }

# The checks the Python side does (PyYAML from kubernetes-validate's dependencies, tomllib):
#   shards TOML MANIFEST...       one shard count everywhere
#   scripts OUT_DIR MANIFEST...   writes each Job's bash to OUT_DIR/*.sh, for ShellCheck
#   members CARGO_TOML CONTAINERFILE   every workspace member, carried crate and COPY source
#   pods SANDBOX MANIFEST...      runs each Job's bash as a pod would, against stub scripts
#   workflow SANDBOX WORKFLOW     runs the workflow's plan, keys, shard, merge and history steps
read -r -d '' CHECKS <<'PY' || true
import json, os, shutil, subprocess, sys, tomllib
import yaml

failures = 0
def ok(msg): print(f"ok    {msg}")
def bad(msg):
    global failures
    failures += 1
    print(f"FAIL  {msg}")

def shards_of(toml_path):
    with open(toml_path, "rb") as f:
        shards = tomllib.load(f).get("shards")
    if type(shards) is not int or shards < 1:
        sys.exit(f"FAIL  {toml_path}: shards = {shards!r}; expected a positive integer")
    return shards

def jobs(manifests):
    for path in manifests:
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if doc and doc.get("kind") == "Job":
                    yield path, doc

def bash_of(container):
    command, args = container.get("command", []), container.get("args", [])
    if command in (["/bin/bash", "-c"], ["bash", "-c"]) and len(args) == 1:
        return args[0]
    return None

def env_of(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}

def shards(toml_path, *manifests):
    want = shards_of(toml_path)
    indexed = 0
    for path, job in jobs(manifests):
        name, spec = f"{path} (Job {job['metadata']['name']})", job["spec"]
        if spec.get("completionMode") == "Indexed":
            indexed += 1
            for key in ("completions", "parallelism"):
                if spec.get(key) != want:
                    bad(f"{name}: {key} = {spec.get(key)!r}, but shards = {want} in {toml_path}")
        for c in spec["template"]["spec"]["containers"]:
            got = env_of(c).get("SHARDS")
            if got != str(want):
                bad(f"{name}: container {c['name']}: SHARDS = {got!r}, but shards = {want} in {toml_path}")
    if indexed == 0:
        bad(f"no Indexed Job in {' '.join(manifests)}")
    if failures == 0:
        ok(f"shard count: shards = {want} in {toml_path} = completions = parallelism of the Indexed Job = SHARDS in every Job")

def scripts(out_dir, *manifests):
    for path, job in jobs(manifests):
        for c in job["spec"]["template"]["spec"]["containers"]:
            script = bash_of(c)
            if script is None:
                bad(f"{path} (Job {job['metadata']['name']}): container {c['name']} does not run `/bin/bash -c SCRIPT`")
                continue
            name = f"{os.path.basename(path)}.{job['metadata']['name']}.{c['name']}.sh"
            with open(os.path.join(out_dir, name), "w") as f:
                f.write(script)

def members(cargo_toml, containerfile):
    with open(cargo_toml, "rb") as f:
        manifest = tomllib.load(f)
    wanted = manifest["workspace"]["members"]
    # The carried crates ([patch.<registry>] entries with a path) are built too.
    carried = sorted(
        dep["path"].rstrip("/")
        for registry in manifest.get("patch", {}).values()
        for dep in registry.values()
        if isinstance(dep, dict) and "path" in dep
    )
    sources = set()
    with open(containerfile) as f:
        for line in f:
            words = line.split()
            if not words or words[0] != "COPY" or any(w.startswith("--from") for w in words):
                continue
            sources.update(w.rstrip("/") for w in words[1:-1] if not w.startswith("--"))
    for source in sorted(sources):
        if not os.path.exists(source):
            bad(f"{containerfile}: COPY {source}: no such file in the repository")
    for member in wanted:
        if member not in sources:
            bad(f"{containerfile}: workspace member {member}/ (in {cargo_toml}) is not copied into the build")
    for path in carried:
        parts = path.split("/")
        if not any("/".join(parts[: i + 1]) in sources for i in range(len(parts))):
            bad(f"{containerfile}: the carried crate {path}/ ([patch] in {cargo_toml}) is not copied into the build")
    if failures == 0:
        ok(f"{containerfile}: copies every workspace member ({', '.join(wanted)}), every carried crate "
           f"({', '.join(carried) or 'none'}) and every source exists")

STUB = """#!/usr/bin/env bash
printf '%s\\n' "$@" >"$STUB_LOG"
printf '%s\\n' "${QSIM_BIN:-}" >"$STUB_LOG.qsim_bin"
exit "${STUB_EXIT:-0}"
"""

# ci/nightly-history.sh runs after the merge script in the same step: its own log and exit status.
HISTORY_STUB = """#!/usr/bin/env bash
printf '%s\\n' "$@" >"$STUB_LOG.history"
exit "${STUB_HISTORY_EXIT:-0}"
"""

def sandbox_with_stubs(sandbox):
    shutil.rmtree(sandbox, ignore_errors=True)
    os.makedirs(os.path.join(sandbox, "ci"))
    for name, text in (("nightly-shard.sh", STUB), ("nightly-merge.sh", STUB), ("nightly-history.sh", HISTORY_STUB)):
        with open(os.path.join(sandbox, "ci", name), "w") as f:
            f.write(text)
        os.chmod(os.path.join(sandbox, "ci", name), 0o755)

# What the history stub was called with in the last call(), or None.
def history_call(sandbox):
    log = os.path.join(sandbox, "stub.log.history")
    return open(log).read().splitlines() if os.path.exists(log) else None

# Runs argv in cwd; the stubs record their arguments under sandbox.
def call(argv, cwd, env, stub_exit=0, sandbox=None, history_exit=0):
    log = os.path.join(sandbox or cwd, "stub.log")
    for stale in (log, log + ".history"):
        if os.path.exists(stale):
            os.remove(stale)
    # python3 is the virtualenv's (3.11 or newer, as on the runners: tomllib).
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]
    env = dict(os.environ, PATH=path, STUB_LOG=log, STUB_EXIT=str(stub_exit), STUB_HISTORY_EXIT=str(history_exit), **env)
    p = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    got = open(log).read().splitlines() if os.path.exists(log) else None
    qsim_bin = open(log + ".qsim_bin").read().strip() if os.path.exists(log + ".qsim_bin") else None
    return p, got, qsim_bin

def expect(what, p, got, want_args, want_status):
    if p.returncode != want_status or got != want_args:
        said = (p.stdout + p.stderr).strip()
        bad(f"{what}: exit {p.returncode} (want {want_status}), script called with {got} (want {want_args})"
            + (f"\n{said}" if said else ""))
        return False
    return True

# Each Job's bash, run with the shard count it is given (whether that count is ci/nightly.toml's
# is the `shards` check).
def pods(sandbox, *manifests):
    for path, job in jobs(manifests):
        spec = job["spec"]
        for c in spec["template"]["spec"]["containers"]:
            script = bash_of(c)
            if script is None:
                continue  # reported by `scripts`
            name = f"{path} (Job {job['metadata']['name']})"
            shards_env = env_of(c).get("SHARDS") or ""
            if not shards_env.isdigit() or int(shards_env) < 1:
                bad(f"{name}: container {c['name']}: SHARDS = {shards_env!r}, not a shard count")
                continue
            want = int(shards_env)
            sandbox_with_stubs(sandbox)
            out = os.path.join(sandbox, "out")
            # The pod's /out is the sandbox's out/.
            script = script.replace("/out", out)
            env = {"SHARDS": shards_env}
            if spec.get("completionMode") == "Indexed":
                good = True
                for index in sorted({0, want - 1}):
                    stale = os.path.join(out, f"shard-{index + 1}", "stale")
                    os.makedirs(os.path.dirname(stale), exist_ok=True)
                    open(stale, "w").close()
                    p, got, _ = call(["bash", "-c", script], sandbox, dict(env, JOB_COMPLETION_INDEX=str(index)))
                    args = [str(index + 1), str(want), os.path.join(out, f"shard-{index + 1}")]
                    good &= expect(f"{name}: pod index {index}", p, got, args, 0)
                    if os.path.exists(stale):
                        bad(f"{name}: pod index {index} left the previous run's files in {os.path.dirname(stale)}")
                        good = False
                if good:
                    ok(f"{name}: pods 0 and {want - 1} run `ci/nightly-shard.sh 1 {want} /out/shard-1` … "
                       f"`{want} {want} /out/shard-{want}`, each in an emptied folder")
            else:
                args = [os.path.join(out, "merged")] + [os.path.join(out, f"shard-{i}") for i in range(1, want + 1)]
                history_args = [os.path.join(out, "history"), os.path.join(out, "merged")]
                good = True
                # (merge's exit, history's exit) -> the pod's exit; history only for a night (0, 1).
                for status, history_exit, pod_exit in ((0, 0, 0), (1, 0, 1), (2, 0, 2), (0, 2, 3), (1, 2, 1)):
                    p, got, _ = call(["bash", "-c", script], sandbox, env, stub_exit=status, history_exit=history_exit)
                    what = f"{name}: merge exiting {status}, history {history_exit}"
                    good &= expect(what, p, got, args, pod_exit)
                    want_history = history_args if status <= 1 else None
                    if history_call(sandbox) != want_history:
                        bad(f"{what}: ci/nightly-history.sh called with {history_call(sandbox)}, want {want_history}")
                        good = False
                if good:
                    ok(f"{name}: runs `ci/nightly-merge.sh /out/merged /out/shard-1 … /out/shard-{want}`, then "
                       "`ci/nightly-history.sh /out/history /out/merged` for a night (merge 0 or 1); the merge's "
                       "exit status is the pod's, 3 when a passing night's history failed")

def steps_of(workflow, job):
    return workflow["jobs"][job]["steps"]

def step_running(workflow, job, needle):
    found = [s for s in steps_of(workflow, job) if needle in s.get("run", "")]
    if len(found) != 1:
        sys.exit(f"FAIL  job {job}: expected one step that runs {needle}, found {len(found)}")
    return found[0]

# GitHub runs `run:` blocks as `bash --noprofile --norc -eo pipefail FILE`.
def gh_bash(sandbox, step):
    path = os.path.join(sandbox, "step.sh")
    with open(path, "w") as f:
        f.write(step["run"])
    return ["bash", "--noprofile", "--norc", "-eo", "pipefail", path]

def outputs(path):
    return dict(line.split("=", 1) for line in open(path).read().splitlines() if "=" in line)

def workflow(sandbox, workflow_path):
    with open(workflow_path) as f:
        wf = yaml.safe_load(f)
    repo = os.getcwd()
    name = workflow_path
    # plan, on the real definition: the matrix is 1..shards.
    sandbox_with_stubs(sandbox)
    plan = next(s for s in steps_of(wf, "plan") if s.get("id") == "plan")
    want = shards_of("ci/nightly.toml")
    gh_out = os.path.join(sandbox, "github_output")
    p, _, _ = call(gh_bash(sandbox, plan), repo, {"GITHUB_OUTPUT": gh_out}, sandbox=sandbox)
    got = outputs(gh_out) if p.returncode == 0 else {}
    if got.get("shards") == str(want) and json.loads(got.get("indexes", "null")) == list(range(1, want + 1)):
        ok(f"{name}: plan reads ci/nightly.toml: shards={want}, matrix indexes 1..{want}")
    else:
        bad(f"{name}: plan step gave {got} (exit {p.returncode}), want shards={want} and indexes 1..{want}\n{p.stderr}")
    # plan, on a bad definition: refused.
    with open(os.path.join(sandbox, "ci", "nightly.toml"), "w") as f:
        f.write("shards = 0\n")
    open(gh_out, "w").close()
    p, _, _ = call(gh_bash(sandbox, plan), sandbox, {"GITHUB_OUTPUT": gh_out})
    if p.returncode != 0 and "shards = 0" in p.stderr:
        ok(f"{name}: plan refuses shards = 0")
    else:
        bad(f"{name}: plan accepted shards = 0 (exit {p.returncode}): {p.stdout}{p.stderr}")
    # keys, on the real Cargo.lock: the RocksDB version the cache is keyed by.
    keys = next(s for s in steps_of(wf, "build") if s.get("id") == "keys")
    gh_env = os.path.join(sandbox, "github_env")
    open(gh_out, "w").close()
    p, _, _ = call(gh_bash(sandbox, keys), repo, {"GITHUB_OUTPUT": gh_out, "GITHUB_ENV": gh_env, "HOME": sandbox},
                   sandbox=sandbox)
    got, env = outputs(gh_out), outputs(gh_env) if os.path.exists(gh_env) else {}
    if p.returncode == 0 and got.get("rocksdb") and env.get("QSIM_CACHE_DIR") == f"{sandbox}/.cache/qsim":
        ok(f"{name}: build's cache key names librocksdb-sys {got['rocksdb']} from Cargo.lock")
    else:
        bad(f"{name}: keys step gave {got}, {env} (exit {p.returncode})\n{p.stderr}")
    # shard: the stub gets index, count and folder, and QSIM_BIN.
    sandbox_with_stubs(sandbox)
    shard = step_running(wf, "shard", "ci/nightly-shard.sh")
    qsim_bin = os.path.join(sandbox, "qsim-bin", "qsim")
    os.makedirs(os.path.dirname(qsim_bin))
    open(qsim_bin, "w").close()
    if set(shard.get("env", {})) != {"QSIM_BIN", "INDEX", "SHARDS"}:
        bad(f"{name}: the shard step's env is {sorted(shard.get('env', {}))}, want INDEX, SHARDS, QSIM_BIN")
    p, got, seen_bin = call(gh_bash(sandbox, shard), sandbox, {"QSIM_BIN": qsim_bin, "INDEX": "3", "SHARDS": "8"})
    if expect(f"{name}: shard step", p, got, ["3", "8", "out/shard-3"], 0):
        if seen_bin == qsim_bin and os.access(qsim_bin, os.X_OK):
            ok(f"{name}: shard step runs `ci/nightly-shard.sh 3 8 out/shard-3` with QSIM_BIN, executable")
        else:
            bad(f"{name}: shard step: the script saw QSIM_BIN={seen_bin!r}, executable: {os.access(qsim_bin, os.X_OK)}")
    # merge: every shard by name; the merge script's exit status is the step's.
    merge = step_running(wf, "merge", "ci/nightly-merge.sh")
    good = True
    for status in (0, 1, 2):
        summary = os.path.join(sandbox, "step_summary")
        open(summary, "w").close()
        p, got, seen_bin = call(gh_bash(sandbox, merge), sandbox,
                                {"QSIM_BIN": qsim_bin, "SHARDS": "3", "GITHUB_STEP_SUMMARY": summary}, stub_exit=status)
        args = ["out/merged", "out/shards/shard-1", "out/shards/shard-2", "out/shards/shard-3"]
        good &= expect(f"{name}: merge step, merge exiting {status}", p, got, args, status)
        if "### Nightly:" not in open(summary).read() or seen_bin != qsim_bin:
            bad(f"{name}: merge step exiting {status}: no verdict in the step summary, or QSIM_BIN={seen_bin!r}")
            good = False
    if good:
        ok(f"{name}: merge step runs `ci/nightly-merge.sh out/merged out/shards/shard-1 …` with QSIM_BIN; "
           "exits 0, 1, 2 as the script does, with a verdict in the step summary")
    # history: the night filed into history/ with QSIM_BIN; the script's exit status is the step's.
    history = step_running(wf, "history", "ci/nightly-history.sh")
    good = True
    for status in (0, 2):
        summary = os.path.join(sandbox, "step_summary")
        open(summary, "w").close()
        p, _, _ = call(gh_bash(sandbox, history), sandbox, {"QSIM_BIN": qsim_bin, "GITHUB_STEP_SUMMARY": summary},
                       history_exit=status)
        got = history_call(sandbox)
        if p.returncode != status or got != ["history", "out/merged"]:
            bad(f"{name}: history step, script exiting {status}: exit {p.returncode}, called with {got}\n{p.stderr}")
            good = False
        elif status == 0 and "### Nightly history" not in open(summary).read():
            bad(f"{name}: history step: nothing in the step summary")
            good = False
    if good:
        ok(f"{name}: history step runs `ci/nightly-history.sh history out/merged` with QSIM_BIN; exits as the "
           "script does, the history in the step summary")

command, *args = sys.argv[1:]
globals()[command](*args)
sys.exit(1 if failures else 0)
PY
checks() { "$bin/python" -c "$CHECKS" "$@"; }

echo "== the tools (pinned, from PyPI: ci/lib/pytools.sh)"
echo "   $("$bin/actionlint" -version | head -n 1); $("$bin/shellcheck" --version | sed -n 2p);" \
  "kubernetes-validate $("$bin/kubernetes-validate" --version); $("$bin/hadolint" --version)"

echo "== self-check: every check rejects a deliberately broken input"
bad=$tmp/broken
mkdir -p "$bad/.github/workflows" "$bad/shell"
cat >"$bad/.github/workflows/broken.yml" <<'EOF'
on:
  schedule:
    - cron: "61 2 * * *"
jobs:
  shard:
    needs: plan
    runs-on: ubuntu-24.04
    steps:
      - uses: actions/checkout@v5
        with:
          fetch_depth: 1
      - run: echo "${{ matrix.index }}"
      - run: ls $HOME/*.txt
EOF
run actionlint "$bad/.github/workflows/broken.yml"
missing=()
for rule in events job-needs action expression shellcheck; do
  grep -q "\[$rule\]" <<<"$out" || missing+=("$rule")
done
if ((status == 1 && ${#missing[@]} == 0)); then
  pass "actionlint rejects a broken workflow: bad cron, unknown needs, unknown input, undefined matrix, ShellCheck finding"
else
  fail "actionlint on a broken workflow: exit $status, rules not reported: ${missing[*]:-none}" "$out"
fi

cat >"$bad/job.yaml" <<'EOF'
apiVersion: batch/v1
kind: Job
metadata:
  name: wrong-type
spec:
  completionMode: Indexed
  completions: "eight"
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: shard
          image: qsim-nightly:latest
          env:
            - name: SHARDS
              value: "8"
---
apiVersion: batch/v1
kind: Job
metadata:
  name: misspelt-field
spec:
  backofLimitPerIndex: 2
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: shard
          image: qsim-nightly:latest
EOF
for version in "${K8S_VERSIONS[@]}"; do
  run kubernetes_validate --kubernetes-version "$version" "$bad/job.yaml"
  if ((status != 0)) && grep -q "wrong-type" <<<"$out" && grep -q "misspelt-field" <<<"$out"; then
    pass "kubernetes-validate $version rejects a Job with completions: \"eight\" and one with a misspelt field"
  else
    fail "kubernetes-validate $version on two broken Jobs: exit $status, not both named" "$out"
  fi
done

printf 'FROM debian\nRUN cd /tmp && apt-get install curl\n' >"$bad/Containerfile"
run hadolint "$bad/Containerfile"
if ((status != 0)) && grep -q DL3006 <<<"$out" && grep -q DL3003 <<<"$out"; then
  pass "hadolint rejects a Containerfile with an untagged base image and a RUN cd"
else
  fail "hadolint on a broken Containerfile: exit $status" "$out"
fi

cat >"$bad/unquoted.yaml" <<'EOF'
apiVersion: batch/v1
kind: Job
metadata:
  name: unquoted
spec:
  template:
    spec:
      containers:
        - name: shard
          command: ["/bin/bash", "-c"]
          args: ["exec ci/nightly-shard.sh $index $SHARDS"]
EOF
run checks scripts "$bad/shell" "$bad/unquoted.yaml"
run shellcheck "$bad/shell"/*.sh
if ((status != 0)) && grep -q SC2086 <<<"$out"; then
  pass "ShellCheck rejects a Job whose bash leaves a variable unquoted"
else
  fail "ShellCheck on a Job's unquoted bash: exit $status" "$out"
fi

printf 'shards = 8\n' >"$bad/nightly.toml"
sed 's/completions: "eight"/completions: 7/' "$bad/job.yaml" >"$bad/job-7.yaml"
run checks shards "$bad/nightly.toml" "$bad/job-7.yaml"
if ((status != 0)) && grep -q "completions = 7, but shards = 8" <<<"$out"; then
  pass "the shard-count check rejects completions: 7 against shards = 8"
else
  fail "the shard-count check on completions: 7 against shards = 8: exit $status" "$out"
fi

# A build that leaves out a workspace member or a carried crate is refused, naming it.
for left_out in "sim/|workspace member sim/" "vendor/|carried crate vendor/madsim/"; do
  dir=${left_out%%|*} expected=${left_out#*|}
  grep -v "^COPY $dir" deploy/container/Containerfile >"$bad/Containerfile-without"
  run checks members Cargo.toml "$bad/Containerfile-without"
  if ((status != 0)) && grep -q "$expected" <<<"$out"; then
    pass "the Containerfile check rejects a build that does not copy $dir"
  else
    fail "the Containerfile check on a build without $dir: exit $status" "$out"
  fi
done

echo "== the launchers"
for path in ci/nightly.toml ci/nightly-shard.sh ci/nightly-merge.sh ci/nightly-history.sh; do
  if [[ ! -f $path ]]; then
    fail "$path is missing: every launcher reads or runs it (docs/sweeps.md, \"The nightly\")"
  elif [[ $path == *.sh && ! -x $path ]]; then
    fail "$path is not executable: the workflow and the Jobs run it directly"
  else
    pass "$path exists"
  fi
done

workflows=(.github/workflows/*.yml)
run actionlint "${workflows[@]}"
if ((status == 0)); then
  pass "actionlint, ShellCheck on run: blocks: ${workflows[*]}"
else
  fail "actionlint: ${workflows[*]}" "$out"
fi

manifests=(deploy/kubernetes/*.yaml)
for version in "${K8S_VERSIONS[@]}"; do
  run kubernetes_validate --kubernetes-version "$version" "${manifests[@]}"
  if ((status == 0)); then
    pass "kubernetes-validate --strict, Kubernetes $version: ${manifests[*]}"
  else
    fail "kubernetes-validate --strict, Kubernetes $version: ${manifests[*]}" "$out"
  fi
done

mkdir -p "$tmp/shell"
counted checks scripts "$tmp/shell" "${manifests[@]}"
scripts=("$tmp/shell"/*.sh)
run shellcheck "${scripts[@]}"
if ((status == 0)); then
  pass "ShellCheck: the bash of every Job (${#scripts[@]} scripts: ${scripts[*]##*/})"
else
  fail "ShellCheck: the bash of the Jobs in deploy/kubernetes/" "$out"
fi

run hadolint deploy/container/Containerfile
if ((status == 0)); then
  pass "hadolint: deploy/container/Containerfile"
else
  fail "hadolint: deploy/container/Containerfile" "$out"
fi
counted checks members Cargo.toml deploy/container/Containerfile

# The scripts the launchers run, too (-x: ci/setup.sh, which the demo sources, is followed).
own=(ci/tests/launchers.sh ci/lib/pytools.sh ci/nightly-shard.sh ci/nightly-merge.sh ci/nightly-history.sh ci/nightly-history-demo.sh ci/nightly-real.sh ci/system-deps.sh ci/test.sh qsim)
run shellcheck -x "${own[@]}"
if ((status == 0)); then
  pass "ShellCheck: ${own[*]}"
else
  fail "ShellCheck: ${own[*]}" "$out"
fi

if [[ -f ci/nightly.toml ]]; then
  counted checks shards ci/nightly.toml "${manifests[@]}"
fi

echo "== the glue, run against stub ci/ scripts"
counted checks pods "$tmp/pods" "${manifests[@]}"
if [[ -f ci/nightly.toml ]]; then
  counted checks workflow "$tmp/workflow" .github/workflows/nightly.yml
fi

echo "launchers: $passed passed, $failed failed"
((failed == 0))
