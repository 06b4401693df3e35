import { ActionIcon, Button, CopyButton as MantineCopy, Tooltip } from "@mantine/core";
import { IconCheck, IconCopy } from "@/components/icons";
import type { ReactNode } from "react";

export function CopyTextButton({
  value,
  label,
  icon,
}: {
  value: string;
  label: string;
  icon?: ReactNode;
}) {
  return (
    <MantineCopy value={value} timeout={1800}>
      {({ copied, copy }) => (
        <Button
          variant="default"
          size="xs"
          onClick={copy}
          leftSection={copied ? <IconCheck size={14} /> : (icon ?? <IconCopy size={14} />)}
          color={copied ? "teal" : undefined}
        >
          {copied ? "Copied" : label}
        </Button>
      )}
    </MantineCopy>
  );
}

export function CopyIcon({ value, label }: { value: string; label: string }) {
  return (
    <MantineCopy value={value} timeout={1500}>
      {({ copied, copy }) => (
        <Tooltip label={copied ? "Copied" : label} withArrow>
          <ActionIcon
            variant="subtle"
            color={copied ? "teal" : "gray"}
            onClick={copy}
            aria-label={label}
          >
            {copied ? <IconCheck size={16} /> : <IconCopy size={16} />}
          </ActionIcon>
        </Tooltip>
      )}
    </MantineCopy>
  );
}
