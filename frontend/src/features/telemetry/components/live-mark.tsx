import { Text } from "@mantine/core";

/** Says that a plot follows a run as it runs. */
export function LiveMark() {
  return (
    <Text size="xs" c="blue" fw={600}>
      ● live
    </Text>
  );
}
