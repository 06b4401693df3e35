import { Anchor, Code, Group, Stack, Text } from "@mantine/core";
import { CopyTextButton } from "@/components/copy-button";
import { apiUrl } from "@/lib/api-client";
import type { Provenance, RunDetail } from "@/lib/types";

type Image = { name?: string } | null;

/**
 * How to rerun a finished run's case by hand: download its archive, unpack it, and run the
 * commands its agent ran, in order (the API's `provenance.rerun`, the same lines as the
 * archive's windtunnel-README.txt), with the OpenFOAM build and image it ran with.
 */
export function RerunBlock({ run, provenance }: { run: RunDetail; provenance: Provenance }) {
  const folder = `run-${run.index}`;
  const image = provenance.image as Image;
  const script = [
    `mkdir ${folder} && tar -xzf ${folder}.tar.gz -C ${folder} && cd ${folder}`,
    ...provenance.rerun,
  ].join("\n");
  return (
    <Stack gap="xs" data-testid="rerun">
      <Text size="sm">
        {run.archive_available ? (
          <>
            <Anchor
              href={apiUrl(`/api/v1/runs/${run.id}/archive/`)}
              download={`${folder}.tar.gz`}
              underline="always"
            >
              Download the archive
            </Anchor>{" "}
            as {folder}.tar.gz
          </>
        ) : (
          "Its archive is not available"
        )}
        , then run, with OpenFOAM {provenance.openfoam_version || "(version not reported)"}
        {image?.name ? ` (image ${image.name})` : " (the backend's own installation)"}:
      </Text>
      <Group align="flex-start" wrap="nowrap" gap="xs">
        <Code block style={{ flex: 1 }} data-testid="rerun-script">
          {script}
        </Code>
        <CopyTextButton value={script} label="Copy" />
      </Group>
      <Text size="xs" c="dimmed">
        The archive holds the case as it ran (system/, constant/, the initial conditions as
        rendered, the logs); its windtunnel-README.txt says what was left out (a mesh over 20 MB)
        and how to make it again. The commands write the time folders and logs anew.
      </Text>
    </Stack>
  );
}
