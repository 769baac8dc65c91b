// The mnist app's whole run, in a file of its own so that the test driver
// test/drivers/mnist_faults runs the same code with a fault hook installed.
#pragma once

namespace pdnn {
class FaultHook;
}

// argv as main's. faults: installed on the run's Context (core/fault_hook.h); the app passes
// none. Returns the exit status; errors are thrown (run_app prints them).
int mnist_app(int argc, char** argv, pdnn::FaultHook* faults = nullptr);
