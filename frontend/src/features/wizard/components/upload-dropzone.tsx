import { Alert, Group, Progress, Stack, Text, ThemeIcon } from "@mantine/core";
import { Dropzone } from "@mantine/dropzone";
import {
  IconAlertTriangle,
  IconFileZip,
  IconFileX,
  IconUpload,
  IconCircleCheck,
} from "@/components/icons";
import { useState } from "react";
import { ApiError, errorMessage } from "@/lib/api-client";
import { formatBytes, plural } from "@/lib/format";
import type { Upload } from "@/lib/types";
import { CaseInspectionPanel } from "./case-inspection";
import { uploadCase } from "../api/wizard";

const ACCEPT = [".tar.gz", ".tgz", ".zip"];

function acceptable(name: string) {
  const lower = name.toLowerCase();
  return ACCEPT.some((ext) => lower.endsWith(ext));
}

/** Drag and drop (or pick) a case archive; shows progress and names the offending entry on error. */
export function UploadDropzone({
  upload,
  onUploaded,
}: {
  upload: Upload | null;
  onUploaded: (u: Upload) => void;
}) {
  const [progress, setProgress] = useState<number | null>(null);
  const [file, setFile] = useState<File | null>(null);
  const [error, setError] = useState<unknown>(null);

  const start = (f: File) => {
    setFile(f);
    setError(null);
    if (!acceptable(f.name)) {
      setError(new Error(`${f.name} is not a .tar.gz, .tgz or .zip archive`));
      return;
    }
    setProgress(0);
    uploadCase(f, setProgress)
      .then((u) => {
        setProgress(null);
        onUploaded(u);
      })
      .catch((e: unknown) => {
        setProgress(null);
        setError(e);
      });
  };

  const entry =
    error instanceof ApiError && error.details && typeof error.details === "object"
      ? ((error.details as { entry?: string }).entry ?? null)
      : null;

  return (
    <Stack gap="sm">
      <Dropzone
        onDrop={(files) => files[0] && start(files[0])}
        onReject={(rejections) => rejections[0] && start(rejections[0].file)}
        multiple={false}
        loading={progress !== null}
        accept={{
          "application/gzip": [".tar.gz", ".tgz"],
          "application/x-gzip": [".tgz"],
          "application/zip": [".zip"],
        }}
        aria-label="Upload a case archive"
        data-testid="case-dropzone"
      >
        <Group justify="center" gap="lg" mih={110} style={{ pointerEvents: "none" }}>
          <Dropzone.Accept>
            <IconUpload size={40} stroke={1.5} color="var(--mantine-color-blue-6)" />
          </Dropzone.Accept>
          <Dropzone.Reject>
            <IconFileX size={40} stroke={1.5} color="var(--mantine-color-red-6)" />
          </Dropzone.Reject>
          <Dropzone.Idle>
            <IconFileZip size={40} stroke={1.5} color="var(--mantine-color-gray-6)" />
          </Dropzone.Idle>
          <div>
            <Text size="md" fw={600}>
              Drop your OpenFOAM case here, or click to choose it
            </Text>
            <Text size="sm" c="dimmed" mt={4}>
              A .tar.gz, .tgz or .zip with 0/, constant/ and system/. Mark what varies with{" "}
              <code>{"{{ name }}"}</code> placeholders in the case files.
            </Text>
          </div>
        </Group>
      </Dropzone>
      {progress !== null && file && (
        <Stack gap={4} aria-live="polite">
          <Group justify="space-between">
            <Text size="sm">
              Uploading {file.name} ({formatBytes(file.size)})
            </Text>
            <Text size="sm" ff="monospace">
              {Math.round(progress * 100)}%
            </Text>
          </Group>
          <Progress value={progress * 100} animated={progress >= 1} aria-label="Upload progress" />
          {progress >= 1 && (
            <Text size="xs" c="dimmed">
              Checking the archive…
            </Text>
          )}
        </Stack>
      )}
      {error !== null && (
        <Alert
          color="red"
          variant="light"
          icon={<IconAlertTriangle size={18} />}
          title="This archive was not accepted"
          role="alert"
        >
          <Stack gap={6}>
            {entry && (
              <Group gap={6} data-testid="upload-error-entry">
                <IconFileX size={16} color="var(--mantine-color-red-7)" />
                <Text size="sm" ff="monospace" fw={600} c="var(--mantine-color-red-light-color)">
                  {file?.name ? `${file.name} › ` : ""}
                  {entry}
                </Text>
              </Group>
            )}
            <Text size="sm">{errorMessage(error)}</Text>
          </Stack>
        </Alert>
      )}
      {upload && progress === null && error === null && (
        <Alert
          color="teal"
          variant="light"
          icon={<IconCircleCheck size={18} />}
          title={`${upload.filename} uploaded`}
        >
          <Text size="sm">
            {plural(upload.files_count ?? 0, "file")}, {formatBytes(upload.unpacked_bytes ?? 0)}{" "}
            unpacked ·{" "}
            {upload.has_mesh
              ? "ships its mesh"
              : upload.has_block_mesh_dict
                ? "meshed with blockMesh before each run"
                : "no mesh found"}
          </Text>
        </Alert>
      )}
      {upload && progress === null && error === null && upload.inspection && (
        <CaseInspectionPanel inspection={upload.inspection} />
      )}
    </Stack>
  );
}

export function UploadedCaseBadge({ upload }: { upload: Upload }) {
  return (
    <Group gap={6}>
      <ThemeIcon size="sm" variant="light" color="teal">
        <IconFileZip size={14} />
      </ThemeIcon>
      <Text size="sm">{upload.filename}</Text>
    </Group>
  );
}
