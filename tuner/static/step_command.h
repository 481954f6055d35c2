#pragma once
// `qtune static --step decode|prefill ...`: the static model's prediction of one whole step of a model
// (step_predict.h), printed launch by launch with its totals. qtune static declares the flags and calls here.
#include "common/cli_args.h"

namespace qt::tune {

// The step flags qtune static declares (declare_step_flags) and reads here (run_step_prediction).
void declare_step_flags(CliArgs& cli);
// Throws qt::Error (exit 2) naming a step flag given without --step.
void check_step_flags(const CliArgs& cli);
int run_step_prediction(const CliArgs& cli, int sm);

}  // namespace qt::tune
