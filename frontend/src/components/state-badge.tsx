import { Badge, Tooltip } from "@mantine/core";
import { RUN, STUDY } from "@/lib/states";
import type { RunState, StudyState, Trust } from "@/lib/types";

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
}: {
  state: StudyState | undefined;
  size?: string;
}) {
  const s = STUDY[state ?? "draft"] ?? { label: state, color: "gray" };
  return (
    <Badge color={s.color} variant="light" size={size} radius="sm" data-state={state}>
      {s.label}
    </Badge>
  );
}

const TRUST: Record<Exclude<Trust, "">, { label: string; color: string; tip: string }> = {
  converged: { label: "Converged", color: "teal", tip: "met the study's convergence policy" },
  not_converged: {
    label: "Not converged",
    color: "yellow",
    tip: "ended without meeting the convergence policy; treat its objectives with care",
  },
  diverged: { label: "Diverged", color: "red", tip: "residuals blew up or became NaN" },
};

export function TrustBadge({ trust }: { trust: Trust | undefined }) {
  if (!trust) return null;
  const t = TRUST[trust];
  if (!t) return null;
  return (
    <Tooltip label={t.tip} withArrow>
      <Badge color={t.color} variant="dot" size="sm" radius="sm">
        {t.label}
      </Badge>
    </Tooltip>
  );
}
