import { ActionIcon, Tooltip } from "@mantine/core";
import { IconBell, IconBellRinging } from "@/components/icons";
import { useWatchedStudy } from "../hooks/use-watched-study";

/** "Notify me": a browser notification when this study ends (while the dashboard is open). */
export function NotifyBell({ study }: { study: { id: string; name: string; state?: string } }) {
  const { watched, denied, toggle, ended } = useWatchedStudy(study);
  const label = denied
    ? "The browser blocks notifications from this site: allow them in its site settings"
    : watched
      ? "Watching: you will be notified when this study ends (click to stop)"
      : "Notify me when this study ends";
  return (
    <Tooltip label={label} multiline w={260} withinPortal>
      <ActionIcon
        variant={watched ? "filled" : "default"}
        size="lg"
        aria-label={watched ? "Stop notifying me" : "Notify me"}
        aria-pressed={watched}
        disabled={ended && !watched}
        onClick={() => void toggle()}
        data-testid="notify-bell"
      >
        {watched ? <IconBellRinging size={18} /> : <IconBell size={18} />}
      </ActionIcon>
    </Tooltip>
  );
}
