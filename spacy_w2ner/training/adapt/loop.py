"""The masked-LM training loop of ``adapt-encoder``, with checkpoints and an exact resume.

A step reads its batch (``corpus.batch_indices``), masks it (``masking``: a function of the seed
and the step), packs it and takes an AdamW step as Hugging Face's Trainer does by default
(weight decay 0, gradients clipped to norm 1; the encoder's learning rate decays linearly to 0
without warm-up; the head alone trains at a constant rate). The held-out loss is measured before
the first step, at the head phase's end, every ``checkpoint_every`` steps of a phase and at the
end, each time followed by a checkpoint; SIGINT, SIGTERM or DIR/STOP stops the run after its step
with a checkpoint. Resumed, the loop loads the checkpoint's weights, the optimizer's and the schedule's
state and the random generators (dropout draws from torch's), and finds its place in the data
and the masks by arithmetic: on a CPU it ends with the weights, bit for bit, of a run that was
never stopped. With ``training_dtype`` bfloat16 each step's passes run on a bfloat16 copy of the
weights made again after every update (a function of the float32 weights, so resuming stays exact).
"""
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Dict, List, Optional

import numpy
import torch

from ...nn.bfloat16 import BFloat16Twin
from ..checkpoints import MODEL, TORCH_OPTIMIZER, TRAINER, random_states_file, write_json
from ..loop import Outcome, info_line
from ..randomness import capture_random_states, restore_random_states
from ..run import RunDirectory
from ..stop import StopRequests
from .corpus import Corpus, Sequences, batch_indices, step_seed
from .directory import KEEP
from .masked_lm import MaskedLM, loss_sum, position_offset
from .masking import MaskedBatch, WholeWordMasking, model_inputs
from .options import ENCODER, HEAD, HELD_OUT, AdaptOptions, Plan

MAX_GRAD_NORM = 1.0
RANDOM_STATE = random_states_file(0, 1)  # one process


@dataclass
class LoopState:
    """What the loop has done: the steps, the evaluations, each step's loss since the last one,
    the run's seconds (all its sessions) and, for each phase's steps, their seconds and the
    process's CPU seconds (all threads: a figure that a busy machine changes less)."""

    done: int = 0
    evaluations: List[dict] = field(default_factory=list)
    losses: List[float] = field(default_factory=list)
    seconds: float = 0.0
    step_seconds: Dict[str, float] = field(default_factory=lambda: {HEAD: 0.0, ENCODER: 0.0})
    step_cpu_seconds: Dict[str, float] = field(default_factory=lambda: {HEAD: 0.0, ENCODER: 0.0})
    timed_steps: Dict[str, int] = field(default_factory=lambda: {HEAD: 0, ENCODER: 0})

    def per_step(self, seconds: Dict[str, float]) -> Dict[str, Optional[float]]:
        return {phase: round(seconds[phase] / n, 4) if n else None for phase, n in self.timed_steps.items()}


class Adaptation:
    """One process's part of an adaptation: the masked LM, its batches, its optimizer and state."""

    def __init__(self, lm: MaskedLM, tokenizer, corpus: Corpus, plan: Plan, options: AdaptOptions, directory: RunDirectory,
                 record: dict, device: torch.device, stdout: Optional[IO] = None, stderr: Optional[IO] = None):  # fmt: skip
        self.lm, self.corpus, self.plan, self.options, self.directory = lm, corpus, plan, options, directory
        self.tokenizer, self.record, self.device = tokenizer, record, device
        self.stdout, self.stderr = stdout or sys.stdout, stderr or sys.stderr
        self.masking = WholeWordMasking(tokenizer, options.masking)
        self.offset = position_offset(lm, corpus.train.ids, tokenizer.pad_token_id)
        self.record["packing"] = {"packs": self.offset is not None, "position_offset": self.offset}
        self.held_out = self._held_out_batches()
        self.twin = BFloat16Twin(lm.model) if options.training_dtype == "bfloat16" else None
        self._twin_lm: Optional[MaskedLM] = None
        self.state = LoopState()
        self.phase: Optional[str] = None
        self.optimizer = self.scheduler = None
        self.seconds_before, self.started = 0.0, time.perf_counter()

    def resume_from(self, checkpoint) -> None:
        """The checkpoint's loop state, optimizer, schedule and random generators (the weights
        are loaded with the model)."""
        data = checkpoint.read_json(TRAINER)
        self.state = LoopState(**{key: data[key] for key in asdict(LoopState())})
        self.seconds_before = self.state.seconds
        if self.state.done < self.plan.total:
            self._start_phase(self.plan.phase(self.state.done))
            saved = torch.load(checkpoint.path / TORCH_OPTIMIZER, map_location=self.device, weights_only=True)
            if saved["phase"] == self.phase:  # else the checkpoint ended the head's phase
                self.optimizer.load_state_dict(saved["optimizer"])
                if self.scheduler is not None:
                    self.scheduler.load_state_dict(saved["scheduler"])
        restore_random_states(checkpoint.read_json(RANDOM_STATE))
        if checkpoint.threads_differ():
            self.say(checkpoint.threads_differ())
        self.say(f"resumed from {checkpoint.path} at step {self.state.done} of {self.plan.total}")

    def run(self, progress: bool = True) -> Outcome:
        """Train to the plan's end (or a stop request); see the module docstring."""
        from tqdm import tqdm

        if not self.state.evaluations:
            self._evaluate()
        bar = tqdm(total=self.plan.total, initial=self.state.done, unit="step", file=self.stderr, disable=not progress,
                   mininterval=1.0 if self.stderr.isatty() else 60.0, dynamic_ncols=True)  # fmt: skip
        with StopRequests(self.stderr, self.directory.stop_file) as stop, bar:
            while self.state.done < self.plan.total:
                loss = self.train_step(self.state.done)
                bar.update(1)
                bar.set_postfix(phase=self.phase, loss=f"{loss:.3f}", refresh=False)
                if self.plan.evaluates_after(self.state.done):
                    self._evaluate(bar.write)
                    self._checkpoint(bar.write)
                elif stop.requested:
                    self._checkpoint(bar.write)
                if stop.requested and self.state.done < self.plan.total:
                    return Outcome(self.state.done, False, stop.exit_signal)
        return Outcome(self.state.done, True)

    # ------------------------------------------------------------ a step

    def _start_phase(self, phase: str) -> None:
        """The phase's optimizer (and schedule): the head's parameters alone at a constant rate,
        or every parameter at a rate decaying linearly to 0 over the encoder's steps."""
        from transformers import get_linear_schedule_with_warmup

        self.phase = phase
        self.lm.train_head_alone(phase == HEAD)
        if phase == HEAD:
            self.optimizer = torch.optim.AdamW(self.lm.head_parameters, lr=self.options.head_learning_rate, weight_decay=0.0, fused=True)
            self.scheduler = None
        else:
            self.optimizer = torch.optim.AdamW(self.lm.model.parameters(), lr=self.options.learning_rate, weight_decay=0.0, fused=True)
            self.scheduler = get_linear_schedule_with_warmup(self.optimizer, 0, self.plan.encoder_steps)

    def _held_out_batches(self) -> List[MaskedBatch]:
        """The held-out sequences in order, masked once (the same masks at every evaluation)."""
        sequences, size = self.corpus.held_out, self.options.batch_size
        starts = range(0, len(sequences), size)
        return [self._batch(sequences, numpy.arange(start, min(start + size, len(sequences))), step_seed(self.options.seed, HELD_OUT, start)) for start in starts]

    def _batch(self, sequences: Sequences, indices: numpy.ndarray, seed: int) -> MaskedBatch:
        ids, words = [sequences.ids[i] for i in indices], [sequences.words[i] for i in indices]
        inputs, labels = self.masking(ids, words, seed)
        return model_inputs(inputs, labels, numpy.asarray([len(sequence) for sequence in ids]), self.offset).to(self.device)

    def train_step(self, step: int) -> float:
        """Train step ``step`` (0-based); its loss (the mean over its masked wordpieces)."""
        phase, place = self.plan.phase(step), self.plan.phase_step(step)
        if phase != self.phase:
            self._start_phase(phase)
        started, cpu_started = time.perf_counter(), time.process_time()
        indices = batch_indices(self.options.seed, phase, place, len(self.corpus.train), self.options.batch_size)
        total, count = loss_sum(self._training_lm(), self._batch(self.corpus.train, indices, step_seed(self.options.seed, phase, place)))
        loss = total / count
        loss.backward()
        if self.twin is not None:
            self.twin.gather_gradients()
        torch.nn.utils.clip_grad_norm_([p for group in self.optimizer.param_groups for p in group["params"]], MAX_GRAD_NORM)
        self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.twin is not None:
            self.twin.stale = True
        value = float(loss.detach())
        self.state.losses.append(value)
        self.state.done = step + 1
        self.state.step_seconds[phase] += time.perf_counter() - started
        self.state.step_cpu_seconds[phase] += time.process_time() - cpu_started
        self.state.timed_steps[phase] += 1
        return value

    def _training_lm(self) -> MaskedLM:
        """The masked LM whose passes train: the model's, or (bfloat16) its bfloat16 copy's, made
        again from the float32 weights after each update (``nn.bfloat16.BFloat16Twin``; the
        optimizer, the checkpoints and the held-out loss keep to the float32 weights)."""
        if self.twin is None:
            return self.lm
        if self._twin_lm is None:
            self._twin_lm = MaskedLM.of(self.twin.module)
        self.twin.fresh().train(self.lm.model.training)
        return self._twin_lm

    # ------------------------------------------------------------ evaluations and checkpoints

    def held_out_loss(self) -> Optional[float]:
        """The mean cross-entropy over the held-out texts' masked wordpieces (the same masks at
        every evaluation; dropout off); None without held-out texts."""
        if not self.held_out:
            return None
        training = self.lm.model.training
        self.lm.model.eval()
        total, count = 0.0, 0
        with torch.no_grad():
            for batch in self.held_out:
                batch_total, batch_count = loss_sum(self.lm, batch)
                total, count = total + float(batch_total), count + batch_count
        self.lm.model.train(training)
        return total / count

    def _evaluate(self, write=None) -> None:
        done, losses = self.state.done, self.state.losses
        held_out = self.held_out_loss()
        phase = "start" if done == 0 else self.plan.phase(done - 1)
        self.state.seconds = self.seconds_before + time.perf_counter() - self.started
        evaluation = {
            "step": done, "phase": phase, "epoch": round(self.plan.epochs_done(done), 4),
            "train_loss": sum(losses) / len(losses) if losses else None, "held_out_loss": held_out,
            "seconds": round(self.state.seconds, 3),
        }  # fmt: skip
        self.state.evaluations.append(evaluation)
        self.state.losses = []
        shown = lambda value: "-" if value is None else f"{value:.4f}"  # noqa: E731
        self.say(f"step {done}/{self.plan.total} ({phase}, epoch {evaluation['epoch']:.2f}): "
                 f"train loss {shown(evaluation['train_loss'])}, held-out loss {shown(held_out)}", write)  # fmt: skip
        self.write_record()

    def _checkpoint(self, write=None) -> None:
        """Write the state after the steps done (``directory.py`` says what goes where)."""
        self.state.seconds = self.seconds_before + time.perf_counter() - self.started
        trainer = {**asdict(self.state), "threads": torch.get_num_threads()}
        saved = {"phase": self.phase, "optimizer": self.optimizer.state_dict(),
                 "scheduler": None if self.scheduler is None else self.scheduler.state_dict()}  # fmt: skip
        random_states = capture_random_states()

        def write_files(directory: Path) -> None:
            self.lm.model.save_pretrained(directory / MODEL)
            torch.save(saved, directory / TORCH_OPTIMIZER)
            write_json(directory / RANDOM_STATE, random_states)
            write_json(directory / TRAINER, trainer)

        started = time.perf_counter()
        written = self.directory.write_checkpoint(self.state.done, write_files, KEEP)
        self.say(f"checkpoint {written.path.name} written in {time.perf_counter() - started:.1f} s", write)
        self.write_record()

    def write_record(self, **facts) -> None:
        """The record (``directory.py``) with the loop's progress so far."""
        self.record.update(
            steps=self.state.done, epochs=round(self.plan.epochs_done(self.state.done), 4), seconds=round(self.state.seconds, 3),
            seconds_per_step=self.state.per_step(self.state.step_seconds),
            cpu_seconds_per_step=self.state.per_step(self.state.step_cpu_seconds), evaluations=self.state.evaluations, threads=torch.get_num_threads(),
            **facts,
        )  # fmt: skip
        self.directory.write_record(self.record)

    def say(self, line: str, write=None) -> None:
        (write or (lambda text: print(text, file=self.stdout, flush=True)))(info_line(line))

