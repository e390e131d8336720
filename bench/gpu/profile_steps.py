"""Where a training step's time goes: ``nlp.update`` steps on a device, profiled.

    python bench/gpu/profile_steps.py ENCODER_DIR TRAIN.spacy [--config w2ner_mpnet_gpu.cfg]
        [--steps 20] [--batch-size 12] [--gpu-id 0] [--precision fp32|bf16|fp16]
        [--deterministic 0|1] [--output profile.txt]

Prints the seconds per step (after a CUDA synchronisation) without a profiler, then, over
the same number of steps, torch's profiler (the device kernels and the host-side operators
by total time: what the GPU does, and what keeps it waiting) and cProfile's top Python
functions by own time. ``--deterministic`` sets ``torch.backends.cudnn.deterministic``
(``spacy train`` sets it to 1 through ``fix_random_seed``).
"""
import argparse
import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("encoder")
    parser.add_argument("train")
    parser.add_argument("--config", default="w2ner_mpnet_gpu.cfg")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=12)
    parser.add_argument("--gpu-id", type=int, default=0)
    parser.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32")
    parser.add_argument("--deterministic", type=int, default=1)
    parser.add_argument("--rows", type=int, default=25)
    parser.add_argument("--output", default="")
    args = parser.parse_args()

    import torch

    from bench import PRECISIONS, training_pipeline, use_device
    from hooks import synchronize

    device = use_device(args.gpu_id)
    mixed, dtype = PRECISIONS[args.precision]

    def edit(config):
        for block in (config["components"]["transformer"]["model"], config["components"]["w2ner"]["model"]):
            block["mixed_precision"], block["mixed_precision_dtype"] = mixed, dtype

    nlp, examples, optimizer = training_pipeline(args.config, args.encoder, args.train, edit)
    # After the seed: spaCy's fix_random_seed turns cuDNN's deterministic mode on.
    torch.backends.cudnn.deterministic = bool(args.deterministic)
    batches = [examples[i : i + args.batch_size] for i in range(0, len(examples), args.batch_size)]

    def steps(first: int) -> float:
        synchronize()
        start = time.perf_counter()
        for batch in batches[first : first + args.steps]:  # as spacy train steps
            nlp.update(batch, sgd=False)
            for _, component in nlp.pipeline:
                if getattr(component, "is_trainable", False):
                    component.finish_update(optimizer)
            optimizer.step_schedules()
        synchronize()
        return (time.perf_counter() - start) / args.steps

    steps(0)  # warm-up
    plain = steps(args.steps)
    text = io.StringIO()
    summary = {
        "bench": "profile-steps", "precision": args.precision, "deterministic": args.deterministic,
        "batch_size": args.batch_size, "seconds_per_step": round(plain, 4),
        "sentences_per_s": round(args.batch_size / plain, 1), "device": device,
    }  # fmt: skip
    text.write(json.dumps(summary) + "\n")
    if args.gpu_id >= 0:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            steps(2 * args.steps)
        averages = prof.key_averages()
        text.write(f"\n== device time, top {args.rows}\n")
        text.write(averages.table(sort_by="cuda_time_total", row_limit=args.rows, max_name_column_width=70))
        text.write(f"\n== host time (self), top {args.rows}\n")
        text.write(averages.table(sort_by="self_cpu_time_total", row_limit=args.rows, max_name_column_width=70))
    python_profile = cProfile.Profile()
    python_profile.enable()
    steps(3 * args.steps)
    python_profile.disable()
    text.write("\n== Python functions by own time\n")
    pstats.Stats(python_profile, stream=text).sort_stats("tottime").print_stats(args.rows)
    print(text.getvalue())
    if args.output:
        Path(args.output).write_text(text.getvalue(), encoding="utf8")


if __name__ == "__main__":
    main()
