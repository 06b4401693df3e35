import { Badge, Tooltip } from "@mantine/core";
import { RUN, STUDY } from "@/lib/states";
import type { RunState, StudyState, Trust, TrustDetail } from "@/lib/types";

export function RunStateBadge({
  state,
  size = "sm",
}: {
  state: RunState | undefined;
  size?: string;
}) {
  const s = RUN[state ?? "pending"] ?? { label: state, color: "gray" };
  return (
    <Badge color={s.color} variant="light" size={size} radius="sm" data-state={state}>
      {s.label}
    </Badge>
  );
}

export function StudyStateBadge({
  state,
  size = "sm",
  progress,
}: {
  state: StudyState | undefined;
  size?: string;
  /** the study's runs by outcome: a study none of whose runs succeeded is "Failed"; one
   * whose runs that did not complete were all cancelled (none failed) is "Partly cancelled" */
  progress?: { completed: number; failed: number; cancelled: number };
}) {
  let s = STUDY[state ?? "draft"] ?? { label: state, color: "gray" };
  if (state === "completed_with_failures" && progress && progress.completed === 0)
    s = progress.failed > 0 ? { label: "Failed", color: "red" } : STUDY.cancelled;
  else if (state === "completed_with_failures" && progress && progress.failed === 0)
    s = { label: "Partly cancelled", color: "orange" };
  return (
    <Badge color={s.color} variant="light" size={size} radius="sm" data-state={state}>
      {s.label}
    </Badge>
  );
}

const TRUST: Record<Exclude<Trust, "">, { label: string; color: string; tip: string }> = {
  converged: {
    label: "Converged",
    color: "teal",
    tip: "the solver's own tolerance or a rule of the study said it converged",
  },
  iteration_limit: {
    label: "Iteration limit",
    color: "yellow",
    tip: "ran to its iteration limit; neither the solver's tolerance nor a study rule said it converged: check its residuals",
  },
  not_converged: {
    label: "Not converged",
    color: "yellow",
    tip: "ended without converging; treat its objectives with care",
  },
  diverged: { label: "Diverged", color: "red", tip: "residuals blew up or became NaN" },
  unsteady: {
    label: "Unsteady",
    color: "orange",
    tip: "an averaged objective oscillates beyond the study's tolerance: its mean is shown with its swing (±)",
  },
};

/** Who said a run converged (trust_detail.basis), in a word for the badge's label. */
const BASIS: Record<string, string> = {
  solver: "solver tolerance",
  study_rule: "study rule",
};

/**
 * A run's trust flag; its tooltip gives the evidence the server recorded (trust_detail.why),
 * and a converged run's badge says who declared it: the solver's tolerance or a study rule.
 */
export function TrustBadge({
  trust,
  detail,
  compact = false,
}: {
  trust: Trust | undefined;
  detail?: TrustDetail | null;
  /** the flag alone (a table cell): who declared it is in the tooltip */
  compact?: boolean;
}) {
  if (!trust) return null;
  const t = TRUST[trust];
  if (!t) return null;
  const basis = trust === "converged" && detail?.basis ? BASIS[detail.basis] : undefined;
  const why = detail?.why || t.tip;
  const suffix = basis && !compact ? ` · ${basis}` : "";
  return (
    <Tooltip label={why} withArrow multiline maw={360}>
      <Badge color={t.color} variant="dot" size="sm" radius="sm" data-trust={trust}>
        {t.label}
        {suffix}
      </Badge>
    </Tooltip>
  );
}
