# pdnn front door. `make mnist` (the main job) and `make test` work from a fresh clone: they
# install missing Debian packages (scripts/install_deps.sh), configure, build, then run.
BUILD    ?= build
JOBS     ?= $(shell nproc)
THREADS  ?= $(shell nproc)
CMAKE_FLAGS ?=
BIN      := $(BUILD)/bin

# OpenBLAS picks its kernels for the CPU it finds. An OPENBLAS_CORETYPE inherited from the
# environment overrides that: the development machine's sets Haswell (AVX2), which halves sgemm
# on its AVX-512 cores (96 vs 200 GFLOP/s at 2048^3). Targets here let OpenBLAS detect the core
# unless BLAS_CORE names one (make bench-mnist BLAS_CORE=Haswell). Every app prints the core
# it runs, and benchmark CSV rows record it.
BLAS_CORE ?= auto
ifeq ($(BLAS_CORE),auto)
unexport OPENBLAS_CORETYPE
else
export OPENBLAS_CORETYPE := $(BLAS_CORE)
endif

.PHONY: all deps configure build test clean help pi scaling plots hebbian hebbian-ab
all: build

help:
	@echo "make mnist          set up, fetch MNIST, train the small CNN (W2) 5 epochs -> results/mnist/"
	@echo "make test           build and run the whole test suite (ctest)"
	@echo "make mnist-keras    W3 on MNIST;  make fashion-mnist: W2 on Fashion-MNIST"
	@echo "make pi             W1 pi benchmark -> results/pi/"
	@echo "make hebbian        W6 Hebbian reservoir grid, pdnn and numpy -> results/hebbian/ (~15 min)"
	@echo "make scaling        thread sweeps -> results/scaling/;  make plots: PNGs from results CSVs"
	@echo "make bench-mnist    pdnn vs PyTorch step times -> results/bench/"
	@echo "make accuracy-mnist pdnn vs PyTorch accuracy, 3 seeds -> results/mnist/accuracy/ (long)"
	@echo "variables: BUILD=$(BUILD) JOBS=$(JOBS) THREADS=$(THREADS) BLAS_CORE=$(BLAS_CORE) CMAKE_FLAGS=..."

# Stamp so the package check runs once per build folder, not at every make.
$(BUILD)/.deps-ok: scripts/install_deps.sh
	@scripts/install_deps.sh
	@mkdir -p $(BUILD) && touch $@
deps: $(BUILD)/.deps-ok

$(BUILD)/CMakeCache.txt: $(BUILD)/.deps-ok
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)
configure: $(BUILD)/CMakeCache.txt

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300

clean:
	rm -rf $(BUILD)

# ---- MNIST (W2, W3) -----------------------------------------------------------------------
# Extra flags for build/bin/mnist, appended (the last of a repeated flag wins), e.g.
# make mnist MNIST_ARGS="--epochs 1 --seed 7".
MNIST_ARGS ?=
.PHONY: mnist mnist-keras fashion-mnist mnist-app bench-mnist
mnist-app: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target mnist

# W2 as the blog ran it: batch 8, Adam 1e-3, 5 epochs. Full MNIST when it can be had, else the
# offline mnist-npm10k set (named so in the output).
mnist: mnist-app
	datasets/get_mnist.sh
	$(BIN)/mnist --model small --batch 8 --epochs 5 --threads $(THREADS) $(MNIST_ARGS)

# W3, the Keras example: batch 128, Adadelta (lr 1, rho 0.95), 12 epochs.
mnist-keras: mnist-app
	datasets/get_mnist.sh
	$(BIN)/mnist --model keras --batch 128 --epochs 12 --threads $(THREADS) $(MNIST_ARGS)

fashion-mnist: mnist-app
	datasets/get_fashion_mnist.sh
	$(BIN)/mnist --model small --dataset fashion-mnist --batch 8 --epochs 5 --threads $(THREADS) $(MNIST_ARGS)

# pdnn vs PyTorch step times (W2 b8, W2 b128, W3 b128 at 1..THREADS threads, or the list
# THREADS=1,2): results/bench/mnist.csv.
# PyTorch (Debian's python3-torch) is installed here when missing and possible.
bench-mnist: build
	datasets/get_mnist.sh
	scripts/install_deps.sh torch || echo "bench-mnist: no PyTorch: timing pdnn alone"
	BIN=$(BIN) THREADS=$(THREAD_LIST) PYTHON=$(PYTHON) scripts/bench_mnist.sh

# pdnn vs PyTorch accuracy, 3 seeds per workload (scripts/accuracy_mnist.sh; long: W3 on
# Fashion-MNIST is ~17 minutes per seed on 2 cores): results/mnist/accuracy/ and its summary.
ACCURACY_WORKLOADS ?= small-npm10k small-fashion keras-fashion
.PHONY: accuracy-mnist
accuracy-mnist: build
	datasets/get_mnist.sh
	datasets/get_fashion_mnist.sh
	scripts/install_deps.sh torch
	BIN=$(BIN) PYTHON=$(PYTHON) scripts/accuracy_mnist.sh $(ACCURACY_WORKLOADS)

# Debian's python3 (matplotlib, torch come from Debian packages), not a pyenv one on the PATH.
PYTHON ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)

# THREADS may be a count (sweep 1..THREADS) or a comma list (exactly those).
comma := ,
THREAD_LIST = $(if $(findstring $(comma),$(THREADS)),$(THREADS),$(shell seq -s, 1 $(THREADS)))
# Threads pinned one per core, neighbours together: steadier timings, same as scaling.sh.
PIN := OMP_PROC_BIND=close OMP_PLACES=cores

pi: build
	$(PIN) $(BIN)/pi --threads $(THREAD_LIST) --out results/pi/pi.csv

scaling: build
	BIN=$(BIN) THREADS=$(THREAD_LIST) PYTHON=$(PYTHON) scripts/scaling.sh

plots:
	$(PYTHON) scripts/plot.py --results results --out results/plots

# ---- W6 Hebbian reservoir --------------------------------------------------------------------
# The grid n x T (SPEC.md) in float32 and float64 at HEBBIAN_THREADS, twice: W6 as written (not
# leaky: W overflows near step 1,770 and those rows say at which step, timing the steps before)
# and leaky (a = HEBBIAN_LEAK: every step timed); numpy on the same problems (a point stops after
# NUMPY_MAX_SECONDS: its row says how many steps were timed); the drift of float32 from float64
# as T grows; plots. -> results/hebbian/hebbian.csv, drift.csv; results/plots/hebbian_*.png
HEBBIAN_N ?= 200,1000,2000
HEBBIAN_T ?= 500,5000,44100
HEBBIAN_THREADS ?= 1,2
HEBBIAN_LEAK ?= 0.5
HEBBIAN_ARGS ?=
NUMPY_MAX_SECONDS ?= 10
HEBBIAN_GRID = --n $(HEBBIAN_N) --t $(HEBBIAN_T) --dtype float32,float64
hebbian: build
	for leak in 0 $(HEBBIAN_LEAK); do \
	  $(PIN) $(BIN)/hebbian $(HEBBIAN_GRID) --threads $(HEBBIAN_THREADS) --leak $$leak $(HEBBIAN_ARGS) || exit 1; \
	  $(PYTHON) scripts/hebbian_numpy.py $(HEBBIAN_GRID) --threads $(HEBBIAN_THREADS) --leak $$leak \
	    --max-seconds $(NUMPY_MAX_SECONDS) || exit 1; \
	  $(BIN)/hebbian --drift --n 1000 --t 10,100,1000 --threads $(lastword $(subst $(comma), ,$(HEBBIAN_THREADS))) --leak $$leak || exit 1; \
	done
	$(PYTHON) scripts/plot.py --results results --out results/plots

# pdnn against numpy and the bandwidth floor at one point, alternated ROUNDS times (the machine
# may be shared: compare the medians) -> results/hebbian/ab.csv
AB_N ?= 1000
AB_T ?= 5000
ROUNDS ?= 5
hebbian-ab: build
	for r in $$(seq $(ROUNDS)); do \
	  $(PIN) $(BIN)/hebbian --n $(AB_N) --t $(AB_T) --threads $(HEBBIAN_THREADS) --leak $(HEBBIAN_LEAK) --out results/hebbian/ab.csv || exit 1; \
	  $(PYTHON) scripts/hebbian_numpy.py --n $(AB_N) --t $(AB_T) --threads $(HEBBIAN_THREADS) --leak $(HEBBIAN_LEAK) \
	    --max-seconds $(NUMPY_MAX_SECONDS) --out results/hebbian/ab.csv || exit 1; \
	done
	$(PYTHON) scripts/plot.py --results results --out results/plots
