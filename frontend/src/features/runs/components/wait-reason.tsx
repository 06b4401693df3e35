import { Alert, Text } from "@mantine/core";
import { IconHourglass } from "@/components/icons";
import type { RunDetail } from "@/lib/types";

const REASONS: Record<string, string> = {
  queued: "Waiting for the scheduler to look at it (it runs every few seconds).",
  quota: "Your tenant's quota is fully in use; the run starts when running runs finish.",
  backend_capacity: "The compute backend is full; the run starts when capacity frees up.",
  cloud_limit:
    "Cloud project limit: the OpenStack project's compute limits are reached; the run starts when the project has room again.",
  retry: "The previous attempt was lost; the run waits to be retried.",
  image: "Its machine image is being built; the run starts when the image is ready.",
  storage: "Your tenant's storage quota is used up; the run starts once there is room again.",
  core_hour_budget: "Your tenant's monthly core-hour budget is used up.",
};

/** The scheduler's detail without the reason it repeats ("backend capacity: …"). */
function detailOf(detail: string): string {
  const text = detail.replace(/^(tenant quota|backend capacity|cloud project limit): /, "");
  return text ? `Now: ${text}.` : "";
}

/** Why a queued run waits: its place in the queue and the reason the scheduler gave. */
export function WaitReason({ run }: { run: RunDetail }) {
  if (run.state !== "pending" && run.state !== "admitted" && run.state !== "provisioning")
    return null;
  const admitted = run.state !== "pending";
  // a job waiting in its backend's own queue (Slurm): the first line of its message says why
  const backendQueue = run.state === "provisioning" && run.phase === "queued";
  const backendReason = backendQueue ? (run.message ?? "").split("\n")[0] : "";
  // admitted, and waiting for a warm pool's worker to boot or free up (docs/pools.md)
  const poolWait = run.state === "admitted" && run.wait_reason === "pool_worker";
  return (
    <Alert
      variant="light"
      color={admitted ? "cyan" : "gray"}
      icon={<IconHourglass size={18} />}
      title={
        admitted
          ? poolWait
            ? "Admitted: waiting for a worker"
            : run.state === "admitted"
              ? "Admitted: starting on its backend"
              : backendQueue
                ? `Queued on ${run.backend}: waiting for the cluster's scheduler`
                : "Provisioning: preparing the case"
          : run.queue_position
            ? `Queued: number ${run.queue_position} in your tenant's queue on ${run.backend}`
            : "Queued"
      }
      data-testid="wait-reason"
    >
      {!admitted && (
        <Text size="sm">
          {REASONS[run.wait_reason ?? ""] ?? "Waiting to be admitted."}
          {run.wait_detail ? ` ${detailOf(run.wait_detail)}` : ""}
        </Text>
      )}
      {poolWait && (
        <Text size="sm" data-testid="pool-wait-reason">
          Resources are reserved; {run.wait_detail || "waiting for a pool worker"}.
        </Text>
      )}
      {admitted && !backendQueue && !poolWait && (
        <Text size="sm">Resources are reserved; the solver starts shortly.</Text>
      )}
      {backendQueue && (
        <Text size="sm" data-testid="backend-queue-reason">
          The job was submitted and waits in the cluster's own queue: {backendReason}
        </Text>
      )}
    </Alert>
  );
}
