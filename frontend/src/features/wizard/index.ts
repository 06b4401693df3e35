export { StudyWizard } from "./components/study-wizard";
export { impactSentence } from "./lib/impact";
export { fetchUpload } from "./api/wizard";
export { emptyForm, formFromSpec, formFromTemplate, toSpec, type WizardForm } from "./lib/form";
