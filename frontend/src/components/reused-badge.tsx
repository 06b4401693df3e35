import { Anchor, Badge, Tooltip } from "@mantine/core";
import { Link } from "react-router";

/** A reused run's badge (docs/reuse.md): it was not computed, it shows the results of an
 * identical earlier run of the tenant, which the badge links to. Nothing for a run that
 * was computed. */
export function ReusedBadge({
  run,
  size = "xs",
}: {
  run: { reused?: boolean; reused_from?: string | null };
  size?: string;
}) {
  if (!run.reused) return null;
  const badge = (
    <Badge color="grape" variant="light" size={size} radius="sm" data-testid="reused-badge">
      Reused
    </Badge>
  );
  if (!run.reused_from)
    return (
      <Tooltip label="Reused; its source's study was deleted, so this run holds the results now">
        {badge}
      </Tooltip>
    );
  return (
    <Tooltip label="Not computed: identical to an earlier run. Open the run that computed it.">
      <Anchor
        component={Link}
        to={`/runs/${run.reused_from}`}
        aria-label="Reused: open the run that computed it"
        data-testid="reused-link"
        style={{ lineHeight: 1 }}
      >
        {badge}
      </Anchor>
    </Tooltip>
  );
}
