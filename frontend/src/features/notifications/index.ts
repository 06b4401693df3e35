export { NotificationSettings } from "./components/notification-settings";
export { NotifyBell } from "./components/notify-bell";
export { WATCHED_KEY } from "./hooks/use-watched-study";
