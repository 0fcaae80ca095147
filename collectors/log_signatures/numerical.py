"""Numerical failures: NaN/Inf losses, loss-scale overflow, the frameworks' own checks."""

from __future__ import annotations

import re

from trainctl.collectors.log_signatures.rule import (
    Blame,
    C,
    Event,
    K,
    S,
    Signature,
    named_self_post,
    sig,
)


def _overflow_post(ev: Event) -> None:
    low = ev.message.lower()
    if "minimum" in low or "cannot decrease" in low:
        ev.severity = S.CRITICAL  # loss scale bottomed out: training cannot recover by itself


# numerical
LOSS: tuple[Signature, ...] = (
    sig(
        "loss_nan",
        # `loss: nan` / `loss=nan` / `'loss': nan` and the bare `loss nan` (trainctl's trainer, torchtitan's
        # "loss: nan" metric logger, fairseq-style "loss nan"): the separator may be a single space.
        # A named loss term counts too ("loss_mn: nan", "losses: nan", "val_loss=nan"). Column-aligned prints pad
        # with spaces ("loss        nan") or zeros (printf "%07.5f" of a NaN: "loss = 0000nan").
        r"\b(?P<metric>(?:lm |train[_ ]|total[_ ]|avg[_ ])?[a-z]{0,20}_?loss(?:es)?(?:_[a-z0-9]{1,20})?|grad[ _]norm)\b"
        # a key-value table's cell ("| loss | nan |", openai's logger.dumpkvs)
        # torch's tensor repr of the loss printed as is ("loss: tensor(nan, device='cuda:0', grad_fn=<...>)")
        r"['\"]?(?:\s*[:=|]\s*|\s{1,12})(?:tensor\(\[*)?(?P<value>[-+]?0*(?:nan|inf))\b",
        K.NUMERICAL,
        C.NAN_LOSS,
        S.WARNING,
        Blame.NONE,
        ["nan", "inf"],
        "A loss or gradient norm printed as nan/inf (Megatron '| grad norm: nan |', HF 'loss': nan, ...).",
        flags=re.I,
    ),
    sig(
        "nan_detected",
        r"(?:Loss is (?:nan|inf)|returned nan values in its \d+th output|Detected (?:NaN|inf)|FloatingPointError|"
        r"number of nan iterations:\s*(?P<nan_iters>[1-9]\d*)"
        # torch/nn/utils/clip_grad.py (error_if_nonfinite=True): "The total norm of order {p} for gradients from
        # `parameters` is non-finite, so it cannot be clipped."
        r"|for gradients from `?parameters`? is non-finite"  # (markdown noise removal may drop the backticks)
        # volcengine/verl verl/workers/actor/dp_actor.py (and its critic, FSDP/Megatron engines) _optimizer_step:
        # print(f"WARN: rank {rank} grad_norm is not finite: {grad_norm}") and the update is skipped. The norm is the
        # global one after clipping's all-reduce: every rank prints it, so the rank is not a culprit.
        r"|grad_norm is not finite"
        # tensorflow/core/kernels/check_numerics_op.cc: InvalidArgument(message, " : Tensor had ", "NaN"/"Inf"/"NaN and
        # Inf", " values") (tf.debugging.check_numerics, the Object Detection API's "LossTensor is inf or nan.")
        r"|Tensor had (?:NaN|Inf|NaN and Inf) values"
        # espnet asr_chainer.py / asr_pytorch: logging.warning("grad norm is nan. Do not update model.")
        r"|grad(?:ient)? norm is (?:nan|inf)"
        # openai guided-diffusion fp16_util.py MixedPrecisionTrainer: "Found NaN, decreased lg_loss_scale to %s"
        r"|Found NaN, decreased lg_loss_scale"
        # fairseq/nan_detector.py NanDetector._detect: f"{err} detected in output of {name}, shape: ..." (err "NaN" or
        # "Inf"; "input" for a module's input, "grad" hooks in backward)
        r"|\b(?:NaN|Inf) detected in (?:output|input|grad)"
        # a trainer's own words for a skipped or stopped step: "Encountered NaN loss at step 520", "NaN loss
        # detected", "inf gradients" (a loss or a gradient that is NaN, said in prose rather than as a value)
        r"|\b(?:NaN|inf) (?:loss(?:es)?|gradients?|grad(?:ient)?[ _]norm)\b"
        # k2-fsa/icefall egs/*/ASR/*/train.py: fp16's grad scale halved at every overflow, logging.warning(f"Grad scale
        # is small: {cur_grad_scale}") below 0.01, then RuntimeError(f"grad_scale is too small, exiting: ...") below
        # 1e-5: every step overflows (a NaN/inf in the forward or the gradients)
        r"|\bGrad scale is small: |\bgrad_scale is too small, exiting"
        # speechbrain/core.py Brain.check_loss_isfinite: logger.warning("Parameter is not finite: " + str(p)) for each
        # NaN/inf parameter after a non-finite loss, then ValueError("Loss is not finite and patience is exhausted. ...")
        r"|\bParameter is not finite: Parameter containing|\bLoss is not finite and patience is exhausted"
        # a tensor or an array printed as is whose first values are NaN/inf (torch/_tensor_str.py "tensor([nan, nan,
        # ...]", numpy's repr "array([nan, nan, ...])"): the values went non-finite
        r"|\b(?:tensor|array)\(\[+\s*-?(?:nan|inf),\s*-?(?:nan|inf)\b"
        # ... and the rows of such a print on lines of their own ("        [nan],", "[nan, nan, nan]],")
        r"|^\s*\[+(?:\s*-?(?:nan|inf),?)+\s*\]+(?:,|\)|,? device=|$)"
        # darknet examples/detector.c train_detector: printf("%ld: %f, %f avg, %f rate, ...") (AlexeyAB's fork "avg
        # loss"), the batch, its loss and the running mean; glibc prints a NaN's %f as "nan" or "-nan"
        # (srun --label's "N: " is peeled off such a line as if it were a task's label: the batch number may be gone)
        r"|(?:^\s*|\d: )-?nan, -?(?:nan|[\d.]+) avg(?: loss)?, -?[\d.]+ rate\b"
        # mmdet engine/hooks/checkloss_hook.py CheckInvalidLossHook (mmdet 2.x core/hook/checkloss_hook.py):
        # runner.logger.info('loss become infinite or NaN!') as its assert on torch.isfinite(loss) fails
        r"|\bloss become infinite or NaN\b"
        # the YOLO trainers' progress row, ultralytics engine/trainer.py _do_train (YOLOv5/v7 train.py the same):
        # ("%11s" * 2 + "%11.4g" * (2 + n_losses)) % (f"{epoch}/{epochs}", f"{mem:.3g}G", *losses, instances, imgsz):
        # a loss column printed by "%11.4g" as "nan"/"inf"
        r"|^\s*\d+/\d+\s+\d+(?:\.\d+)?G\s+(?:-?[\d.]+(?:e[-+]?\d+)?\s+)*-?(?:nan|inf)\b)",
        K.NUMERICAL,
        C.NAN_LOSS,
        S.WARNING,
        Blame.NONE,
        [
            "loss is",
            "nan values",
            "detected nan",
            "detected inf",
            "FloatingPointError",
            "nan iterations",
            "finite",
            "inf values",
            "norm is",
            "found nan",
            "detected in output",
            "detected in input",
            "detected in grad",
            "nan loss",
            "inf loss",
            "nan grad",
            "inf grad",
            "grad scale is small",
            "grad_scale is too small",
            "is not finite",
            "nan,",
            "infinite or nan",
            "nan",  # a YOLO progress row's loss column
            "inf,",
            "[nan",
            "[inf",
            "[-inf",
        ],
        "Explicit NaN detection (anomaly mode, trainer guards, Megatron nan counter > 0).",
        flags=re.I,
    ),
    sig(
        "tensorboard_nan_scalar",
        # lanpa/tensorboardX tensorboardX/x2num.py check_nan: logger.warning('NaN or Inf found in input tensor.') for
        # every value written to TensorBoard (older releases through the root logger). Some logged value (a loss, a
        # gradient norm, also an inf grad norm while fp16 loss scaling calibrates) was not finite: which, it does
        # not say, so generic.
        r"NaN or Inf found in input tensor",
        K.NUMERICAL,
        C.NAN_LOSS,
        S.WARNING,
        Blame.NONE,
        ["NaN or Inf found"],
        "TensorBoard (tensorboardX) was handed a NaN/Inf value to log.",
        generic=True,
    ),
    sig(
        "progress_metric_nan",
        # A training loop's progress line (a step counter, then its metrics as name=value or name: value) with a metric
        # printed as NaN, whatever the metric is called: MXNet's python/mxnet/callback.py Speedometer ("Epoch[%d] Batch
        # [%d-%d]\tSpeed: %.2f samples/sec" + "\t%s=%f" per metric), GluonCV's scripts/detection/*/train_*.py
        # ("[Epoch {}][Batch {}], Speed: {:.3f} samples/sec, {}={:.3f}" with the metric's own name: CrossEntropy,
        # SmoothL1, RPN_Conf), mmcv/mmengine's text logger ("Epoch [e][i/n]\tlr: ..., <key>: <value>"), Lightning's
        # progress-bar postfix ("it/s, loss=nan, v_num=..."). Python's float formatting writes NaN as "nan" (printf's
        # %f also "-nan"): a metric the loop computes went non-finite. Only NaN: "inf" is also a loop's starting
        # "best" value; a loss named as such is loss_nan's. The name may be missing or come after the value: a NaN
        # standing as a value of its own after the counter counts too (RETURNN's "step 11, ctc nan", a mean printed
        # beside its window's value, "(nan)").
        r"\b(?:epoch|iter(?:ation)?|step|batch)\b\W{0,4}\d+[^\n]{0,400}?(?<![\w.])"
        r"(?:(?P<metric>[a-z][\w./-]{0,40}?)\s*[=:]\s*(?P<value>[-+]?nan)\b"
        r"|(?P<value__2>[-+]?nan)(?=\s*(?:[,;|)\]}]|$)))",  # a value of its own: a separator or the end after it
        K.NUMERICAL,
        C.NAN_LOSS,
        S.WARNING,
        Blame.NONE,
        ["nan"],
        "A metric of a training loop's progress line printed as NaN (MXNet's Speedometer, GluonCV, mmcv, Lightning).",
        flags=re.I,
        generic=True,
    ),
    sig(
        "hf_trainer_log_nan",
        # Hugging Face Trainer's log dict printed as Python writes it: transformers src/transformers/trainer_callback.py
        # ProgressCallback.on_log (`self.training_bar.write(str(logs))`) and PrinterCallback.on_log (`print(logs)`),
        # with the 'epoch' key Trainer.log adds (src/transformers/trainer.py: `logs["epoch"] = self.state.epoch`);
        # TRL's trainers add their own keys ('rewards/chosen', 'logps/rejected', ...). repr() of a float NaN is
        # `nan`: a metric the loop computed went non-finite (a loss named as such is loss_nan's, read first).
        r"^(?=[^\n]*'epoch': [\d.]+)\s*\{'[^\n]{0,2000}?'(?P<metric>[\w./-]{1,60})': (?P<value>[-+]?nan)\b",
        K.NUMERICAL,
        C.NAN_LOSS,
        S.WARNING,
        Blame.NONE,
        ["nan"],
        "A metric of Hugging Face Trainer's (or TRL's) log dict printed as nan.",
        generic=True,
    ),
    sig(
        "fp16_overflow",
        r"\[(?:deepscale|deepspeed)\] OVERFLOW!(?: Rank (?P<ds_rank>\d+))?(?:.*?Attempted loss scale: (?P<loss_scale>[\d.]+))?"
        r"|Gradient overflow\.\s+Skipping step|Current loss scale already at minimum"
        # fairseq optim/fp16_optimizer.py: "NOTE: overflow detected, setting loss scale to: {scale}" (older
        # "| WARNING: overflow detected, ..."); its DynamicLossScaler raises FloatingPointError("Minimum loss
        # scale reached ({min}). Your loss is probably exploding. ...").
        r"|overflow detected, setting loss scale to: (?P<loss_scale__2>[\d.e-]+)|Minimum loss scale reached"
        # DeepSpeed runtime/fp16/fused_optimizer.py, unfused_optimizer.py step: "[deepspeed] fp16 dynamic loss scale
        # overflow! Skipping step. Attempted loss scale: {}, reducing to {}", _update_scale: "Grad overflow on
        # iteration: {}".
        r"|fp16 dynamic loss scale overflow!|Grad overflow on iteration:? \d+"
        # DeepSpeed 0.3 engine.py (log_dist, rank 0): "Overflow detected. Skipping step. Attempted loss scale: %s,
        # reducing to %s"
        r"|Overflow detected\. Skipping step\. Attempted loss scale: (?P<loss_scale__3>[\d.]+)",
        K.NUMERICAL,
        C.OVERFLOW,
        S.INFO,
        Blame.NONE,
        ["overflow", "already at minimum", "minimum loss scale"],
        "fp16 loss-scale overflow (DeepSpeed 0.3 '[deepscale]', later '[deepspeed]', apex, fairseq). Normal while "
        "the scale calibrates; critical once the scale is at its minimum.",
        post=_overflow_post,
    ),
    sig(
        "megatron_skipped_iterations",
        # Megatron-LM megatron/training/training.py training_log: "number of skipped iterations: {:3d} |", above 0 in
        # fp16 when steps were skipped for an overflow. Its own small pattern: every iteration line carries the
        # counter, so the long overflow alternation above does not run on each of them.
        r"number of skipped iterations:\s*(?P<skipped_iters>[1-9]\d*)",
        K.NUMERICAL,
        C.OVERFLOW,
        S.INFO,
        Blame.NONE,
        ["skipped iterations"],
        "Megatron skipped iterations (fp16 overflows while the loss scale settles).",
    ),
)


# training frameworks' own numerical checks
FRAMEWORK_CHECKS: tuple[Signature, ...] = (
    sig(
        "megatron_nan_check",
        # Megatron-LM: megatron/core/distributed/param_and_grad_buffer.py (core 0.4-0.8) asserts
        # f"Rank {global_rank}: found NaN in local grad norm in backward pass before data-parallel
        # communication collective. Device: {device}, node: {os.uname()[1]}" (older trees: "backwards pass");
        # core 0.9+ routes it through megatron/core/rerun_state_machine.py validate_result, which raises
        # f"Rank {rank}, node {node}, device {device}, iteration {it}: Unexpected result {result}
        # (message='found NaN in local grad norm for bucket #{i} ...')"; the loss check says
        # "found NaN in local forward loss calculation". The rank and node are the checking process's own.
        # validate_result's first report (core 0.10+, logger.error) is f"Unexpected result {result} on
        # rank {rank} at iteration #{it} invocation #{n} (message='{message}')".
        # (the iteration is -1 before the state machine is told one: "iteration -1")
        r"(?:Rank (?P<self_rank>\d+)(?:, node (?P<self_node>[\w.-]+), device \d+, iteration #?-?\d+)?: )?"
        r"(?:Unexpected result (?:nan|inf)\b(?: on rank (?P<self_rank__c>\d+))?[^\n]*?)?"
        r"found (?:NaN|Inf) in local (?P<what>grad norm|forward loss)"
        r"(?:[^\n]*?node: (?P<self_node__b>[\w.-]+))?",
        K.NUMERICAL,
        C.NAN_LOSS,
        S.CRITICAL,
        Blame.SELF,
        ["found nan in local", "found inf in local"],
        "Megatron-LM's NaN check on the local gradient norm or loss; names the rank and node that found it.",
        post=named_self_post,
    ),
    sig(
        "deepspeed_loss_scale_traceback",
        # deepspeed/runtime/fp16/loss_scaler.py DynamicLossScaler.update_scale raises only
        # Exception("Current loss scale already at minimum - cannot decrease scale anymore. Exiting run."); a
        # traceback through the ZeRO optimizers' _update_scale (runtime/zero/stage_1_and_2.py, stage3.py) or
        # update_scale itself is that exception when its own line is cut off the excerpt.
        r"File \"[^\"]*deepspeed/runtime/(?:zero/stage(?:_1_and_2|3)|fp16/loss_scaler|fp16/fused_optimizer)\.py\", "
        r"line \d+, in _?update_scale\b",
        K.NUMERICAL,
        C.OVERFLOW,
        S.WARNING,
        Blame.NONE,
        ["update_scale"],
        "A traceback through DeepSpeed's loss-scale update: the fp16 loss scale hit its minimum (its line cut off).",
        generic=True,
    ),
)
