import { Select, type SelectProps } from "@mantine/core";

/**
 * A small select for what a plot shows (an objective, an axis): one option is always chosen,
 * so it cannot be cleared and `onPick` gets only values.
 */
export function PlotSelect({
  onPick,
  ...props
}: Omit<SelectProps, "onChange" | "allowDeselect" | "size"> & {
  onPick: (value: string) => void;
}) {
  return <Select size="xs" allowDeselect={false} onChange={(v) => v && onPick(v)} {...props} />;
}
