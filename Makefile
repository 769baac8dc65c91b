# pdnn front door. `make mnist` (the main job) and `make test` work from a fresh clone: they
# install missing Debian packages (scripts/tools/install_deps.sh), configure, build, then run.
# Every run target writes under runs/ (git-ignored: your runs); results/ holds the published
# reference results, which no target writes (make plots REFERENCE=1 draws them into runs/).
BUILD    ?= build
JOBS     ?= $(shell nproc)
THREADS  ?= $(shell nproc)
CMAKE_FLAGS ?=
BIN      := $(BUILD)/bin

# OpenBLAS picks its kernels for the CPU it finds, unless OPENBLAS_CORETYPE names a kernel set.
# Some machines set it (and OPENBLAS_L2_SIZE) on purpose, because older OpenBLAS builds compute
# wrong results or crash on CPUs they misdetect: both are respected whenever they are set, by
# `make test`, `make test-sanitize` and CI always. Where it is not set and OpenBLAS picked a core
# without instructions the CPU has (Debian's 0.3.21 runs SSE3 "Prescott" kernels on CPUs it does
# not know), every pdnn app executes itself again with the best core the CPU runs
# (lib/run/blas_core.h) and its header says so; the run and benchmark targets export that same
# choice, as `build/bin/blas_core --env` prints it, to the whole target, so that numpy and
# PyTorch (the same OpenBLAS) beside pdnn get the same kernels. BLAS_CORE: empty (the default)
# keeps the environment's choice, else pdnn's; auto ignores the environment's variable and lets
# OpenBLAS detect the core, corrected by pdnn as above (on an AVX-512 machine whose environment
# pins Haswell, sgemm is twice as fast); a name forces that kernel set (make bench-mnist
# BLAS_CORE=Haswell). Every app prints the core it runs, and CSV rows record it.
BLAS_CORE ?=
BLAS_UNSET := -u OPENBLAS_CORETYPE -u PDNN_OPENBLAS_DETECTED
ifeq ($(BLAS_CORE),auto)
BLAS_ENV = env $(BLAS_UNSET) $$(env $(BLAS_UNSET) $(BIN)/blas_core --env)
else ifneq ($(BLAS_CORE),)
BLAS_ENV := env -u PDNN_OPENBLAS_DETECTED OPENBLAS_CORETYPE=$(BLAS_CORE)
else
BLAS_ENV = env $$($(BIN)/blas_core --env)
endif

.PHONY: all deps configure build test check-deps test-avx2 test-sanitize fuzz clean help pi scaling plots hebbian hebbian-ab
all: build

help:
	@echo "make mnist          set up, fetch MNIST, train the small CNN (W2) 5 epochs -> runs/mnist/"
	@echo "make test           build and run the whole test suite (ctest)"
	@echo "make check-deps     no upward #include between lib/'s floors (scripts/tools/check_deps; --markdown: the matrix)"
	@echo "make test-avx2      the suite built for AVX2 CPUs without AVX-512 (x86-64-v3, in build-avx2/)"
	@echo "make test-sanitize  the suite under AddressSanitizer + UBSan (Debug build in build-sanitize/)"
	@echo "make check-readme   every README target in its short form on the CPU, then git status as before (~5 min; not in CI)"
	@echo "make fuzz           libFuzzer targets (clang) for FUZZ_SECONDS=$(FUZZ_SECONDS) each (build-fuzz/)"
	@echo "make mnist-keras    W3 on MNIST;  make fashion-mnist: W2 on Fashion-MNIST"
	@echo "make segment        U-Net on datasets/ccp-200 (person vs background): small on a CPU (~2 min), the paper's width on a GPU -> runs/segment/"
	@echo "make dcgan          W5 DCGAN, the study's 300 epochs on the Caltech photos (GPU; a short CPU run without) -> runs/dcgan/"
	@echo "make dcgan-quality  W5 pdnn vs PyTorch: 10,000 samples each scored by a pdnn classifier (long on a CPU; DATASET=caltech: the photos, 3 seeds x 300 epochs, GPU)"
	@echo "make bench-dcgan    W5 iteration times and per-layer profiles, pdnn vs PyTorch, 1 and 2 threads -> runs/bench/dcgan*.csv"
	@echo "make mnist-keras-dist  W3 data-parallel over RANKS=$(RANKS) processes (mpirun, --distributed)"
	@echo "make dcgan-dist     W5 data-parallel over RANKS=$(RANKS) processes (mpirun, --distributed) -> runs/dcgan/dist/"
	@echo "make pi             W1 pi benchmark -> runs/pi/"
	@echo "make hebbian        W6 Hebbian reservoir grid, pdnn and numpy -> runs/hebbian/ (~15 min)"
	@echo "make scaling        thread sweeps -> runs/scaling/"
	@echo "make plots          PNGs from your runs' CSVs -> runs/plots/ (REFERENCE=1: results/'s -> runs/plots/reference/)"
	@echo "make bench-mnist    pdnn vs PyTorch step times -> runs/bench/"
	@echo "make bench-gpu      pdnn vs PyTorch on a GPU (eager, CUDA graph; fp32, TF32) -> runs/bench/gpu.csv"
	@echo "make bench-conv-gpu every W3/W4/W5 convolution per pass and algorithm, pdnn vs PyTorch -> runs/bench/conv_gpu*.csv"
	@echo "make bench-conv-steps W3/W4/W5 steps per --conv-algo policy (im2col, own, auto) beside PyTorch -> runs/bench/conv-steps/"
	@echo "make bench-memory   W4 at 224..1344 px on a GPU, uncapped and --gpu-memory-limit, vs PyTorch offload/checkpoint -> runs/scale/memory_r2.csv, memory_table.md"
	@echo "make gpu-bundle     CUDA build + libraries + data in gpu-bundle/ for a lent GPU host (GPU_BINS, GPU_DATA; scripts/gpu/README.md)"
	@echo "make bench-conv     3x3 convolutions of W2-W4 per pass: im2col vs Winograd vs direct -> runs/bench/conv.csv"
	@echo "make accuracy-mnist pdnn vs PyTorch accuracy, 3 seeds -> runs/mnist/accuracy/ (long)"
	@echo "make caltech101     W4 (9-layer CNN, 224x224) on the six Caltech101 classes, 30 epochs -> runs/caltech101/ (long on a CPU)"
	@echo "make bench-caltech  pdnn vs PyTorch W4 step times at 1 and 2 threads, per-layer profile -> runs/bench/caltech.csv (long)"
	@echo "variables: BUILD=$(BUILD) JOBS=$(JOBS) THREADS=$(THREADS) BLAS_CORE=$(BLAS_CORE) (empty, auto or a core) CMAKE_FLAGS=..."

# Stamp so the package check runs once per build folder, not at every make.
$(BUILD)/.deps-ok: scripts/tools/install_deps.sh
	@scripts/tools/install_deps.sh
	@mkdir -p $(BUILD) && touch $@
deps: $(BUILD)/.deps-ok

$(BUILD)/CMakeCache.txt: $(BUILD)/.deps-ok
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)
configure: $(BUILD)/CMakeCache.txt

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300

# The include floors of docs/DESIGN.md (also a ctest test; here without building anything).
check-deps:
	python3 scripts/tools/check_deps

# The whole suite built as on an AVX2 machine without AVX-512 (AMD EPYC up to Zen 3, Intel
# before Skylake-X): -march=x86-64-v3, Release, in build-avx2/. The SIMD kernels then run 8
# lanes wide instead of 16 (ops/simd.h) and the compiler makes its choices for that target, so
# a difference that only such a machine would show (issue 24: fused and unfused models apart in
# the last bits) fails here, on any CPU with AVX2 and FMA, CI's AVX-512 machines included.
# Without the CUDA backend: make test has compiled it, and CI has no GPU.
AVX2_BUILD ?= build-avx2
test-avx2: deps
	@grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo || \
	  { echo "test-avx2: this CPU lacks AVX2 or FMA: an x86-64-v3 build cannot run here"; exit 1; }
	cmake -S . -B $(AVX2_BUILD) -DCMAKE_BUILD_TYPE=Release -DPDNN_ARCH=x86-64-v3 -DPDNN_CUDA=OFF \
	  $(CMAKE_FLAGS)
	cmake --build $(AVX2_BUILD) -j $(JOBS) --target pdnn_tests
	cd $(AVX2_BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300

# Every make target README.md names, in its short form, on the CPU, then `git status` as before
# (a user's runs go to runs/, never into the committed tree); GPU-only targets and the test
# suites (CI runs them itself) are skipped with the reason. About 5 minutes on 2 cores; not in
# CI, over its time budget (.ci/run says why) (scripts/tools/readme_targets.sh; TARGET... for some only: make check-readme
# READMECHECK="pi plots").
.PHONY: check-readme
READMECHECK ?=
check-readme: build
	BUILD=$(BUILD) scripts/tools/readme_targets.sh $(READMECHECK)

# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer, Debug, stopping at the
# first report (CI runs it after make test). -O1 keeps the end-to-end tests fast enough. Without
# the CUDA backend: CI has no GPU (its tests skip), `make test` has already compiled it, and
# compiling the .cu files a second time would only add to CI's time. Under the sanitizers
# Conv3x3's shape tests leave out their W4-sized shapes (test_conv3x3.cpp says why). It builds
# pdnn_tests and what its tests run (the apps but the bench_* ones, the test drivers), as
# make test-avx2 does; the apps' own sources at -O0 (CMakeLists.txt says why).
# SANITIZE_ARCH: the -march of this build (native by default). CI gives x86-64-v3: the 8-lane
# (AVX2) kernels under the sanitizers, which is also what make test-avx2 checks, so CI runs no
# separate AVX2 build (-ffp-contract=off and no fast-math: the numbers do not depend on -O, so
# an -O1 build checks what an -O2 one computes; DESIGN.md rule 14, results/ci-time.md). -g1:
# line tables only, enough for the sanitizers' stack traces, and about a third less compile.
SANITIZE_BUILD ?= build-sanitize
SANITIZE_ARCH ?= native
# allocator_may_return_null: pdnn checks every allocation and turns a failed one into an error
# naming the tensor's role (MemoryPlanExecution.OutOfMemoryNamesTheTensorsRole asks for 2^60
# bytes to see it); by default ASan aborts on such a request instead of returning null.
SANITIZE_ENV := ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:allocator_may_return_null=1 \
                UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
test-sanitize: deps
	@[ "$(SANITIZE_ARCH)" != x86-64-v3 ] || { grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; } || \
	  { echo "test-sanitize: SANITIZE_ARCH=x86-64-v3 but this CPU lacks AVX2 or FMA"; exit 1; }
	cmake -S . -B $(SANITIZE_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-g1 -O1" \
	  -DPDNN_ARCH=$(SANITIZE_ARCH) -DPDNN_SANITIZE=address,undefined -DPDNN_CUDA=OFF $(CMAKE_FLAGS)
	cmake --build $(SANITIZE_BUILD) -j $(JOBS) --target pdnn_tests
	cd $(SANITIZE_BUILD) && $(SANITIZE_ENV) ctest --output-on-failure -j $(JOBS) --timeout 600

# libFuzzer targets (test/fuzz/fuzz_*.cpp) built with Debian's clang into build-fuzz/, each run
# for FUZZ_SECONDS on one core (scripts/tools/fuzz.sh). Not needed by make test.
FUZZ_SECONDS ?= 60
FUZZ_BUILD ?= build-fuzz
fuzz:
	scripts/tools/install_deps.sh fuzz
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPDNN_FUZZ=ON -DPDNN_CUDA=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	scripts/tools/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(AVX2_BUILD) $(SANITIZE_BUILD) $(FUZZ_BUILD)

# ---- MNIST (W2, W3) -----------------------------------------------------------------------
# Extra flags for build/bin/mnist, appended (the last of a repeated flag wins), e.g.
# make mnist MNIST_ARGS="--epochs 1 --seed 7".
MNIST_ARGS ?=
.PHONY: mnist mnist-keras fashion-mnist mnist-app bench-mnist
mnist-app: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target mnist blas_core

# W2 as the blog ran it: batch 8, Adam 1e-3, 5 epochs. Full MNIST when it can be had, else the
# offline mnist-npm10k set (named so in the output).
mnist: mnist-app
	datasets/get_mnist.sh
	$(BLAS_ENV) $(BIN)/mnist --model small --batch 8 --epochs 5 --threads $(THREADS) $(MNIST_ARGS)

# W3, the Keras example: batch 128, Adadelta (lr 1, rho 0.95), 12 epochs.
mnist-keras: mnist-app
	datasets/get_mnist.sh
	$(BLAS_ENV) $(BIN)/mnist --model keras --batch 128 --epochs 12 --threads $(THREADS) $(MNIST_ARGS)

# W3 data-parallel: RANKS processes under mpirun, the same global batch 128 and learning rate,
# each rank with the cores divided among them (README.md, "Several processes").
RANKS ?= 2
MPIRUN_FLAGS ?= --bind-to none $(if $(filter 0,$(shell id -u)),--allow-run-as-root)
.PHONY: mnist-keras-dist
mnist-keras-dist: mnist-app
	datasets/get_mnist.sh
	$(BLAS_ENV) mpirun $(MPIRUN_FLAGS) -np $(RANKS) $(BIN)/mnist --model keras --batch 128 --epochs 12 --distributed $(MNIST_ARGS)

fashion-mnist: mnist-app
	datasets/get_fashion_mnist.sh
	$(BLAS_ENV) $(BIN)/mnist --model small --dataset fashion-mnist --batch 8 --epochs 5 --threads $(THREADS) $(MNIST_ARGS)

# pdnn vs PyTorch step times (W2 b8, W2 b128, W3 b128 at 1..THREADS threads, or the list
# THREADS=1,2): runs/bench/mnist.csv.
# PyTorch (Debian's python3-torch) is installed here when missing and possible.
bench-mnist: build
	datasets/get_mnist.sh
	scripts/tools/install_deps.sh torch || echo "bench-mnist: no PyTorch: timing pdnn alone"
	$(BLAS_ENV) BIN=$(BIN) THREADS=$(THREAD_LIST) PYTHON=$(PYTHON) scripts/bench/bench_mnist.sh

# pdnn vs PyTorch on a GPU (run on a machine with one and a CUDA build): W2 b8, W2 b128, W3,
# eager and CUDA graph, fp32 and TF32, PyTorch the same way in the same run, pi on the GPU:
# runs/bench/gpu.csv, runs/pi/pi_gpu.csv (scripts/bench/bench_gpu.sh). On a lent GPU host
# without a build: `make gpu-bundle` here, then `scripts/gpu/visit.sh bench` there
# (scripts/gpu/README.md).
.PHONY: bench-gpu gpu-bundle
bench-gpu: build
	datasets/get_mnist.sh
	BIN=$(BIN) scripts/bench/bench_gpu.sh

# Issues 18, 26: W4 at growing input sides on one GPU, pdnn uncapped and under --gpu-memory-limit
# caps beside PyTorch plain, save_on_cpu and checkpoint: peak memory and ms per step,
# runs/scale/memory_r2.csv (scripts/bench/bench_memory.sh; keep each call under 10 minutes on a lent
# GPU: one or two sides at a time), then its table (scripts/report/memory_table.py) and plot.
SIDES ?= 224 448 672 896 1120 1344
CAPS ?= 20G
.PHONY: bench-memory
bench-memory: build
	BIN=$(BIN) SIDES="$(SIDES)" CAPS="$(CAPS)" scripts/bench/bench_memory.sh
	$(PYTHON) scripts/report/memory_table.py runs/scale/memory_r2.csv
	$(PYTHON) scripts/report/plot_memory.py runs/scale/memory_r2.csv --out runs/scale/memory_r2.png || echo "bench-memory: no plot (matplotlib?)"

# gpu-bundle/ for a lent GPU host: a CUDA build (build-gpu/) of GPU_BINS with their libraries and
# the data sets GPU_DATA (scripts/gpu/prepare.sh; the runner headers say what each one needs).
GPU_BINS ?= mnist pi pdnn_tests
GPU_DATA ?= mnist-npm10k
gpu-bundle:
	BINS="$(GPU_BINS)" DATA="$(GPU_DATA)" scripts/gpu/prepare.sh

# The GPU convolution engine, layer by layer and step by step (issue 17), pdnn and PyTorch in
# one command on a machine with a GPU and this build: every convolution of W3/W4/W5, each pass
# and algorithm, then W3/W4/W5 steps per --conv-algo policy beside PyTorch's.
.PHONY: bench-conv-gpu bench-conv-steps
bench-conv-gpu: build
	RESULTS=runs/bench BIN=$(BIN) scripts/gpu/runners/conv.sh
	RESULTS=runs/bench scripts/gpu/runners/torch-conv.sh
bench-conv-steps: build
	datasets/get_mnist.sh
	RESULTS=runs/bench/conv-steps BIN=$(BIN) MNIST_DATA=datasets/mnist-npm10k scripts/gpu/runners/conv-steps.sh

# pdnn vs PyTorch accuracy, 3 seeds per workload (scripts/study/accuracy_mnist.sh; long: W3 on
# Fashion-MNIST is ~17 minutes per seed on 2 cores): runs/mnist/accuracy/ and its summary.
ACCURACY_WORKLOADS ?= small-npm10k small-fashion keras-fashion
.PHONY: accuracy-mnist
accuracy-mnist: build
	datasets/get_mnist.sh
	datasets/get_fashion_mnist.sh
	scripts/tools/install_deps.sh torch
	$(BLAS_ENV) BIN=$(BIN) PYTHON=$(PYTHON) scripts/study/accuracy_mnist.sh $(ACCURACY_WORKLOADS)

# ---- Caltech101 (W4) ----------------------------------------------------------------------
# W4 as the Cython paper ran it: the six classes shipped in datasets/caltech101-6, 224x224,
# batch 64, AdaGrad 0.01, 1,280 training images per epoch, 30 epochs (about 2 minutes an epoch
# on 2 CPU cores; a few seconds on a GPU: CALTECH_ARGS="--device cuda"). Extra flags for
# build/bin/caltech101 are appended (the last of a repeated flag wins).
CALTECH_ARGS ?=
.PHONY: caltech101 caltech101-app bench-caltech
caltech101-app: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target caltech101 blas_core

caltech101: caltech101-app
	datasets/get_caltech101.sh
	$(BLAS_ENV) $(BIN)/caltech101 --threads $(THREADS) $(CALTECH_ARGS)

# pdnn vs PyTorch (default and tuned) seconds per W4 step at 1 and 2 threads, runs alternating,
# medians; the per-layer profile and each convolution's GFLOP/s against the sgemm rate of the
# same run: runs/bench/caltech.csv (scripts/bench/bench_caltech.sh; about 25 minutes on 2 cores).
bench-caltech: build
	datasets/get_caltech101.sh
	scripts/tools/install_deps.sh torch || echo "bench-caltech: no PyTorch: timing pdnn alone"
	$(BLAS_ENV) BIN=$(BIN) THREADS=$(THREAD_LIST) PYTHON=$(PYTHON) scripts/bench/bench_caltech.sh

# ---- Segmentation (issue 34) ---------------------------------------------------------------
# A U-Net (lib/workloads/segmentation/unet.h) on the shipped datasets/ccp-200 (Clothing
# Co-Parsing, person vs background: 151 training and 49 test photos). Without a GPU (or with
# DEVICE=cpu) a small one that finishes in a few minutes on 2 cores (about 10 s of CPU an
# epoch): 64 px, base width 8, depth 3, batch 8, SEGMENT_EPOCHS=10; with one (or DEVICE=cuda) the paper's width and depth at 256 px
# (base 64, depth 4, batch 4), 30 epochs. runs/segment/: the CSV (a row per epoch: loss, pixel
# accuracy, IoU and Dice per class and their means, peak memory, seconds), overlays/<run>/
# epoch_NNN.png (photo | truth | prediction for the first test images) and plots/ (the curves:
# scripts/report/plot.py). SEGMENT_ARGS are appended to build/bin/segment's flags (the last of
# a repeated flag wins): SEGMENT_ARGS="--epochs 1" shortens it, "--classes 59" trains the
# clothing classes.
SEGMENT_ARGS ?=
SEGMENT_EPOCHS ?= 10
SEGMENT_CPU := --size 64 --base 8 --depth 3 --batch 8 --epochs $(SEGMENT_EPOCHS)
SEGMENT_GPU := --device cuda --size 256 --base 64 --depth 4 --batch 4 --epochs 30
.PHONY: segment
segment: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target segment blas_core
	datasets/get_ccp.sh --check
	@dev=$(DEVICE); [ -n "$$dev" ] || dev=$$(nvidia-smi -L 2>/dev/null | grep -q '^GPU' && echo cuda || echo cpu); \
	  if [ "$$dev" = cuda ]; then flags="$(SEGMENT_GPU)"; else flags="$(SEGMENT_CPU)"; fi; \
	  echo "$(BIN)/segment --threads $(THREADS) $$flags $(SEGMENT_ARGS)"; \
	  $(BLAS_ENV) $(BIN)/segment --threads $(THREADS) $$flags $(SEGMENT_ARGS)
	$(PYTHON) scripts/report/plot.py --results runs/segment --out runs/segment/plots

# ---- DCGAN (W5) ------------------------------------------------------------------------------
# Extra flags for build/bin/dcgan, appended (the last of a repeated flag wins), e.g.
# make dcgan DCGAN_ARGS="--dataset mnist --epochs 2" or DCGAN_ARGS="--data ~/cats".
DCGAN_ARGS ?=
.PHONY: dcgan dcgan-quality bench-dcgan
# W5 as the PyCUDA study ran it (batch 64, 46 iterations per epoch, Adam 2e-4, beta1 0.5, 300
# epochs) on the shipped colour photos (datasets/caltech101-6; DATA=folder for any photos): with
# a GPU (or DEVICE=cuda) the full run; without, a short CPU run that first says how long the
# full one would take here (make dcgan DEVICE=cpu EPOCHS=300 starts it). runs/dcgan/: CSV,
# iterations, samples/<dataset>/epoch_NNN.png, progression_<dataset>.png, plots/
# (scripts/study/dcgan_study.sh; EPOCHS, DEVICE, DATA, SEED; DCGAN_ARGS appended to the app's flags).
dcgan: build
	$(BLAS_ENV) BIN=$(BIN) PYTHON=$(PYTHON) THREADS=$(THREADS) ARGS="$(DCGAN_ARGS)" scripts/study/dcgan_study.sh

# W5 data-parallel: RANKS processes under mpirun (or one per GPU with DCGAN_ARGS="--device cuda"),
# the same global batch 64; BatchNorm per rank (dcgan --bn-shards RANKS is one process doing the
# same). The study's recipe on the photos, EPOCHS (300) epochs -> runs/dcgan/dist/.
.PHONY: dcgan-dist
dcgan-dist: build
	$(BLAS_ENV) mpirun $(MPIRUN_FLAGS) -np $(RANKS) $(BIN)/dcgan --dataset caltech --batch 64 \
	  --epochs $(or $(EPOCHS),300) --distributed --out runs/dcgan/dist/dcgan_caltech101-6.csv \
	  --iterations-out runs/dcgan/dist/dcgan_caltech101-6_iterations.csv \
	  --samples-dir runs/dcgan/dist/samples $(DCGAN_ARGS)

# The quality score beyond the paper: pdnn's and PyTorch's DCGAN (same recipe, weights, data
# order and noise), 10,000 samples each, judged by pdnn's W3 classifier (scripts/study/dcgan_quality.sh;
# EPOCHS=5 DATASET=fashion-mnist DEVICE=cpu). Long on a CPU: about an hour on 2 cores.
# DATASET=caltech: the study's comparison on the photos, 3 seeds x 300 epochs of both, scored
# after epochs 50, 150 and 300 by the photo judge, with the table over seeds (on a GPU; a short
# CPU run without one; scripts/study/dcgan_quality_photos.sh: SEEDS, EPOCHS, PARTS, JOBS, DEVICE).
dcgan-quality: build
	scripts/tools/install_deps.sh torch || echo "dcgan-quality: no PyTorch: pdnn alone (TORCH=0)"
	$(BLAS_ENV) BIN=$(BIN) PYTHON=$(PYTHON) THREADS=$(THREADS) scripts/study/dcgan_quality.sh

# W5 iteration times at 1 and 2 threads (THREADS=1,2), pdnn vs PyTorch default and tuned, runs
# interleaved: runs/bench/dcgan.csv (scripts/bench/bench_dcgan.sh; STEPS=8 REPEAT=2).
bench-dcgan: build
	scripts/tools/install_deps.sh torch || echo "bench-dcgan: no PyTorch: timing pdnn alone"
	$(BLAS_ENV) BIN=$(BIN) THREADS=$(THREAD_LIST) PYTHON=$(PYTHON) scripts/bench/bench_dcgan.sh

# Debian's python3 (matplotlib, torch come from Debian packages), not a pyenv one on the PATH.
PYTHON ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)

# THREADS may be a count (sweep 1..THREADS) or a comma list (exactly those).
comma := ,
THREAD_LIST = $(if $(findstring $(comma),$(THREADS)),$(THREADS),$(shell seq -s, 1 $(THREADS)))
# Threads pinned one per core, neighbours together: steadier timings, same as scaling.sh.
PIN := OMP_PROC_BIND=close OMP_PLACES=cores

# Extra flags for build/bin/pi, appended: PI_ARGS="--repeat 1 --n 20000000" for a quick look.
PI_ARGS ?=
pi: build
	$(BLAS_ENV) $(PIN) $(BIN)/pi --threads $(THREAD_LIST) --out runs/pi/pi.csv $(PI_ARGS)

# The convolutions of W2, W3 and W4, each pass (forward, backward data, backward weights)
# timed per algorithm (im2col per image, Winograd, direct), runs alternating, with the sgemm
# 2048^3 rate of the same run: runs/bench/conv.csv. Long (W4 at batch 64: ~10 minutes on 2
# cores); BENCH_CONV_ARGS="--batch 16 --filter W3" narrows it. BLAS_CORE=Haswell for AVX2 BLAS.
BENCH_CONV_ARGS ?=
.PHONY: bench-conv
bench-conv: build
	$(BLAS_ENV) $(PIN) $(BIN)/bench_conv --threads $(THREAD_LIST) --out runs/bench/conv.csv $(BENCH_CONV_ARGS)

scaling: build
	$(BLAS_ENV) BIN=$(BIN) THREADS=$(THREAD_LIST) PYTHON=$(PYTHON) scripts/bench/scaling.sh

# Your runs' figures (runs/ -> runs/plots/); REFERENCE=1: the published reference results'
# (results/ -> runs/plots/reference/; results/plots/ holds the committed ones).
REFERENCE ?=
plots:
	$(PYTHON) scripts/report/plot.py $(if $(REFERENCE),--results results --out runs/plots/reference,--results runs --out runs/plots)

# ---- W6 Hebbian reservoir --------------------------------------------------------------------
# The grid n x T (SPEC.md) in float32 and float64 at HEBBIAN_THREADS, twice: W6 as written (not
# leaky: W overflows near step 1,770 and those rows say at which step, timing the steps before)
# and leaky (a = HEBBIAN_LEAK: every step timed); numpy on the same problems (a point stops after
# NUMPY_MAX_SECONDS: its row says how many steps were timed); the drift of float32 from float64
# as T grows; plots. -> runs/hebbian/hebbian.csv, drift.csv; runs/plots/hebbian_*.png
HEBBIAN_N ?= 200,1000,2000
HEBBIAN_T ?= 500,5000,44100
HEBBIAN_THREADS ?= 1,2
HEBBIAN_LEAK ?= 0.5
HEBBIAN_ARGS ?=
NUMPY_MAX_SECONDS ?= 10
HEBBIAN_GRID = --n $(HEBBIAN_N) --t $(HEBBIAN_T) --dtype float32,float64
hebbian: build
	for leak in 0 $(HEBBIAN_LEAK); do \
	  $(BLAS_ENV) $(PIN) $(BIN)/hebbian $(HEBBIAN_GRID) --threads $(HEBBIAN_THREADS) --leak $$leak $(HEBBIAN_ARGS) || exit 1; \
	  $(BLAS_ENV) $(PYTHON) scripts/twins/hebbian_numpy.py $(HEBBIAN_GRID) --threads $(HEBBIAN_THREADS) --leak $$leak \
	    --max-seconds $(NUMPY_MAX_SECONDS) || exit 1; \
	  $(BIN)/hebbian --drift --n 1000 --t 10,100,1000 --threads $(lastword $(subst $(comma), ,$(HEBBIAN_THREADS))) --leak $$leak || exit 1; \
	done
	$(PYTHON) scripts/report/plot.py --results runs --out runs/plots

# pdnn against numpy and the bandwidth floor at one point, alternated ROUNDS times (the machine
# may be shared: compare the medians) -> runs/hebbian/ab.csv
AB_N ?= 1000
AB_T ?= 5000
ROUNDS ?= 5
hebbian-ab: build
	for r in $$(seq $(ROUNDS)); do \
	  $(BLAS_ENV) $(PIN) $(BIN)/hebbian --n $(AB_N) --t $(AB_T) --threads $(HEBBIAN_THREADS) --leak $(HEBBIAN_LEAK) --out runs/hebbian/ab.csv || exit 1; \
	  $(BLAS_ENV) $(PYTHON) scripts/twins/hebbian_numpy.py --n $(AB_N) --t $(AB_T) --threads $(HEBBIAN_THREADS) --leak $(HEBBIAN_LEAK) \
	    --max-seconds $(NUMPY_MAX_SECONDS) --out runs/hebbian/ab.csv || exit 1; \
	done
	$(PYTHON) scripts/report/plot.py --results runs --out runs/plots
