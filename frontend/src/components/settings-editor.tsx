import {
  ActionIcon,
  Alert,
  Badge,
  Button,
  Group,
  Select,
  Stack,
  Text,
  TextInput,
  UnstyledButton,
} from "@mantine/core";
import { IconChevronRight, IconPlus, IconTrash } from "@/components/icons";
import {
  type DraftErrors,
  newSettingRow,
  SETTING_EXAMPLES,
  SETTING_FILES,
  type SettingFile,
  type SettingRow,
} from "@/lib/continuation";

const FILES = SETTING_FILES.map((f) => ({ value: f, label: f }));

/**
 * "Change settings (restart)": rows of (case file, dotted key, value) a restart writes into
 * system/ before the solver goes on, with examples that add themselves as a row. Open while
 * it holds a row or an error.
 */
export function SettingsEditor({
  rows,
  onChange,
  errors,
  opened,
  onToggle,
}: {
  rows: SettingRow[];
  onChange: (rows: SettingRow[]) => void;
  errors: DraftErrors;
  opened: boolean;
  onToggle: () => void;
}) {
  const set = (id: string, patch: Partial<SettingRow>) =>
    onChange(rows.map((r) => (r.id === id ? { ...r, ...patch } : r)));
  const filled = rows.filter((r) => r.key.trim() || r.value.trim()).length;
  return (
    <Stack gap="xs">
      <UnstyledButton onClick={onToggle} aria-expanded={opened} data-testid="settings-toggle">
        <Group gap={6}>
          <IconChevronRight
            size={16}
            style={{
              transform: opened ? "rotate(90deg)" : undefined,
              transition: "transform 120ms",
            }}
          />
          <Text size="sm" fw={600}>
            Change settings (restart)
          </Text>
          {filled > 0 && (
            <Badge size="xs" variant="light">
              {filled} changed
            </Badge>
          )}
        </Group>
      </UnstyledButton>
      {opened && (
        <Stack gap="xs" data-testid="settings-editor">
          <Text size="xs" c="dimmed">
            Written into the case&apos;s system/ files before the solver goes on, and kept in the
            run&apos;s provenance. A key is dotted (sub-dictionaries joined by dots); values are
            numbers and words only.
          </Text>
          {rows.map((row, i) => (
            <Group key={row.id} gap="xs" align="flex-start" wrap="nowrap">
              <Select
                aria-label={`Setting ${i + 1} file`}
                data={FILES}
                value={row.file}
                onChange={(v) => v && set(row.id, { file: v as SettingFile })}
                allowDeselect={false}
                w={140}
              />
              <TextInput
                aria-label={`Setting ${i + 1} key`}
                placeholder="relaxationFactors.equations.U"
                value={row.key}
                onChange={(e) => set(row.id, { key: e.currentTarget.value })}
                error={errors[`setting.${row.id}.key`]}
                style={{ flex: 2 }}
                ff="monospace"
              />
              <TextInput
                aria-label={`Setting ${i + 1} value`}
                placeholder="0.5"
                value={row.value}
                onChange={(e) => set(row.id, { value: e.currentTarget.value })}
                error={errors[`setting.${row.id}.value`]}
                style={{ flex: 1 }}
                ff="monospace"
              />
              <ActionIcon
                variant="subtle"
                color="gray"
                size="lg"
                aria-label={`Remove setting ${i + 1}`}
                onClick={() => onChange(rows.filter((r) => r.id !== row.id))}
              >
                <IconTrash size={16} />
              </ActionIcon>
            </Group>
          ))}
          {errors.settings && (
            <Alert color="red" variant="light" role="alert" data-testid="settings-error">
              {errors.settings}
            </Alert>
          )}
          <Group gap="xs">
            <Button
              size="xs"
              variant="default"
              leftSection={<IconPlus size={14} />}
              onClick={() => onChange([...rows, newSettingRow()])}
            >
              Add setting
            </Button>
            <Text size="xs" c="dimmed">
              e.g.
            </Text>
            {SETTING_EXAMPLES.map((x) => (
              <Button
                key={`${x.file}.${x.key}`}
                size="compact-xs"
                variant="subtle"
                ff="monospace"
                title={`Add ${x.file} ${x.key} = ${x.value}`}
                onClick={() => onChange([...rows, newSettingRow(x)])}
              >
                {x.file} {x.key} = {x.value}
              </Button>
            ))}
          </Group>
        </Stack>
      )}
    </Stack>
  );
}
