#!/bin/bash
# Moves the real chain with forkctl, offline, on local bare copies of the public repositories, and checks
# each move the way the consumers do (issue 32):
#   1. publish the fork head; bump-bridge --through nemo-rl --push from the Bridge's 355ef3eae (pins the
#      plain base) and NeMo-RL's d5fb8d04; run the Bridge's OWN tests/unit_tests/training/test_mcore_commit.py
#      on the bump commit (it compares .main.commit with the gitlink);
#   2. squash-merge that bump into the Bridge's farai/main as GitHub does (one new commit, branch deleted),
#      run bump-bridge --through nemo-rl --push again and check-pins the NeMo-RL branch it leaves;
#   3. a second toolkit ports onto 14346b65 and publishes; the first, still on the old base, must not
#      publish over it; an uncommitted manifest edit must not be published either;
#   4. the real consumers on two upstream commits (Bridge main 067f987d -> 2a75ac12, NeMo-RL 7ea279ab ->
#      Bridge 8c46dc42 -> 14346b65): check-pins must print one `forkctl port --onto`.
#
# Needs bare repositories (e.g. from snapshots of NVIDIA/Megatron-LM, NVIDIA-NeMo/Megatron-Bridge and
# NVIDIA-NeMo/RL): MEGATRON, BRIDGE, NEMO_RL. Everything else is made under WORK (default: a temp folder).
#   MEGATRON=... BRIDGE=... NEMO_RL=... scripts/real_chain_moves.sh [FORKCTL_COMMAND]
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FORKCTL=${1:-$ROOT/.venv/bin/forkctl}
WORK=${WORK:-$(mktemp -d)}
: "${MEGATRON:?a bare clone of NVIDIA/Megatron-LM}" "${BRIDGE:?a bare clone of NVIDIA-NeMo/Megatron-Bridge}"
: "${NEMO_RL:?a bare clone of NVIDIA-NeMo/RL}"
BASE=d12f6c8c9aff51e166d872fd70151687a8e3f375
export GIT_CONFIG_GLOBAL=$WORK/gitconfig FORKCTL_CACHE=$WORK/cache
mkdir -p "$WORK" && cd "$WORK" || exit 2
for name in megatron-lm:"$MEGATRON" fork:"$MEGATRON" bridge:"$BRIDGE" bridge-fork:"$BRIDGE" \
    nemo-rl:"$NEMO_RL" nemo-rl-fork:"$NEMO_RL"; do
    [ -d "${name%%:*}.git" ] || git clone -q --bare "${name#*:}" "${name%%:*}.git"
    git --git-dir="${name%%:*}.git" config uploadpack.allowFilter true
done
git --git-dir=fork.git update-ref -d refs/heads/farai/main 2>/dev/null
git --git-dir=bridge-fork.git update-ref refs/heads/farai/main 355ef3eae
git --git-dir=nemo-rl-fork.git update-ref refs/heads/farai/main d5fb8d04
cat > gitconfig <<CONFIG
[url "$WORK/megatron-lm.git"]
	insteadOf = https://github.com/NVIDIA/Megatron-LM.git
[url "$WORK/fork.git"]
	insteadOf = https://github.com/AlignmentResearch/Megatron-LM.git
[url "$WORK/bridge.git"]
	insteadOf = https://github.com/NVIDIA-NeMo/Megatron-Bridge.git
[url "$WORK/bridge-fork.git"]
	insteadOf = https://github.com/AlignmentResearch/megatron-bridge-contrib.git
[url "$WORK/nemo-rl.git"]
	insteadOf = https://github.com/NVIDIA-NeMo/RL.git
[url "$WORK/nemo-rl-fork.git"]
	insteadOf = https://github.com/AlignmentResearch/nemo-rl.git
[user]
	name = Real History
	email = real@example.invalid
CONFIG
rm -rf cache toolkit toolkit2 bridge-work
git clone -q "$ROOT" toolkit
forkctl() { "$FORKCTL" --manifest "$1/manifest.yaml" "${@:2}"; }
step() { printf '\n== %s\n' "$*"; }

step "1. publish, then bump-bridge --through nemo-rl --push"
forkctl toolkit publish --allow-pending sm90-ep2 | tail -2
forkctl toolkit bump-bridge --through nemo-rl --push --allow-pending sm90-ep2 | tail -6
bump=$(git --git-dir=bridge-fork.git for-each-ref --format='%(refname:short)' refs/heads/forkctl/)
git --git-dir=bridge-fork.git show --stat --format='%H %s' "$bump" | head -6
step "the Bridge's own test_mcore_commit.py on $bump"
git clone -q --no-checkout bridge-fork.git bridge-work
(cd bridge-work && git checkout -q "origin/$bump" -- tests/unit_tests/training/test_mcore_commit.py .main.commit \
    .dev.commit && git update-ref HEAD "$(git rev-parse "origin/$bump")" &&
    python3 -m pytest -q --noconftest -p no:cacheprovider tests/unit_tests/training/test_mcore_commit.py | tail -1)

step "2. squash-merge $bump into the Bridge's farai/main (branch deleted), then --through nemo-rl again"
bridge=(git --git-dir=bridge-fork.git)
old_tip=$("${bridge[@]}" rev-parse farai/main)
squash=$(GIT_AUTHOR_DATE=2026-12-06T02:00:00Z GIT_COMMITTER_DATE=2026-12-06T02:00:00Z "${bridge[@]}" commit-tree \
    "$("${bridge[@]}" rev-parse "$bump^{tree}")" -p "$old_tip" -m "build: bump Megatron-LM (#9999)")
"${bridge[@]}" update-ref refs/heads/farai/main "$squash" "$old_tip" && "${bridge[@]}" update-ref -d "refs/heads/$bump"
echo "squashed as $squash"
forkctl toolkit bump-bridge --through nemo-rl --push --allow-pending sm90-ep2 | tail -5
nemo_branch=$(git --git-dir=nemo-rl-fork.git for-each-ref --format='%(refname:short)' refs/heads/forkctl/)
forkctl toolkit check-pins --consumer "https://github.com/AlignmentResearch/megatron-bridge-contrib.git@farai/main" \
    --consumer "https://github.com/AlignmentResearch/nemo-rl.git@$nemo_branch" | tail -4

step "3. a toolkit on 14346b65 publishes; the old-base toolkit must not publish over it"
git clone -q toolkit toolkit2
forkctl toolkit2 port --onto 14346b65a2d0790e451919858f7771078105c5f0 | tail -1
git -C toolkit2 add -A manifest.yaml patches && git -C toolkit2 commit -q -m "port onto 14346b65"
# The ported series has no GPU evidence yet: this publish says so in its merge commit (--no-gate).
forkctl toolkit2 publish --no-gate | tail -1
tip=$(git --git-dir=fork.git rev-parse farai/main)
forkctl toolkit publish --allow-pending sm90-ep2 | tail -6
echo "exit ${PIPESTATUS[0]}; farai/main $(git --git-dir=fork.git rev-parse farai/main) (was $tip)"
sed -i 's/^# forkctl manifest/# forkctl manifest (edited)/' toolkit2/manifest.yaml
forkctl toolkit2 publish --dry-run --no-gate | tail -3
echo "exit ${PIPESTATUS[0]}"

step "4. the real consumers on two upstream commits: one way forward"
git --git-dir=bridge-fork.git update-ref refs/heads/farai/main 067f987df
git --git-dir=nemo-rl-fork.git update-ref refs/heads/farai/main 7ea279abf
echo "port lines printed by check-pins: $(forkctl toolkit check-pins 2>&1 | grep -c 'forkctl port --onto')"
forkctl toolkit check-pins 2>&1 | grep -B1 -A1 'forkctl port --onto'
echo "base $BASE; work folder $WORK"
