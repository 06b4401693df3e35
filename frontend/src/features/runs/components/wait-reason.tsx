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
};

/** Why a queued run waits: its place in the queue and the reason the scheduler gave. */
export function WaitReason({ run }: { run: RunDetail }) {
  if (run.state !== "pending" && run.state !== "admitted" && run.state !== "provisioning")
    return null;
  const admitted = run.state !== "pending";
  return (
    <Alert
      variant="light"
      color={admitted ? "cyan" : "gray"}
      icon={<IconHourglass size={18} />}
      title={
        admitted
          ? run.state === "admitted"
            ? "Admitted: starting on its backend"
            : "Provisioning: preparing the case"
          : run.queue_position
            ? `Queued: number ${run.queue_position} in your tenant's queue`
            : "Queued"
      }
      data-testid="wait-reason"
    >
      {!admitted && (
        <Text size="sm">
          {REASONS[run.wait_reason ?? ""] ?? "Waiting to be admitted."}
          {run.wait_detail ? ` (${run.wait_detail})` : ""}
        </Text>
      )}
      {admitted && <Text size="sm">Resources are reserved; the solver starts shortly.</Text>}
    </Alert>
  );
}
