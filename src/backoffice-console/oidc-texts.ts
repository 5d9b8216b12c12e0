/** The words of signing in with a brand's OpenID Connect provider (oidc-routes.ts), Thai first. */
export const OIDC_TH = {
  oidc_heading: 'เข้าสู่ระบบด้วยบัญชีขององค์กร',
  oidc_not_configured: 'แบรนด์นี้ยังไม่ได้ตั้งค่าการเข้าสู่ระบบด้วย OpenID Connect ขอลิงก์เข้าสู่ระบบด้วยคำสั่ง npm run cli -- bo login หรือติดต่อผู้ดูแลแบรนด์',
  oidc_provider_unavailable: 'ติดต่อผู้ให้บริการยืนยันตัวตนของแบรนด์ไม่ได้ในขณะนี้ กรุณาลองใหม่อีกครั้งในภายหลัง',
  oidc_refused: 'การเข้าสู่ระบบนี้ดำเนินการต่อไม่ได้ อาจหมดเวลา 10 นาทีแล้ว หรือคำตอบจากผู้ให้บริการไม่ตรงกับคำขอ กรุณาเริ่มเข้าสู่ระบบใหม่',
  oidc_unmapped_heading: 'บัญชีนี้ไม่อยู่ในรายชื่อเจ้าหน้าที่',
  oidc_unmapped: 'ผู้ให้บริการยืนยันตัวตนของคุณแล้ว แต่บัญชีนี้ไม่อยู่ในรายชื่อเจ้าหน้าที่ที่ผู้ดูแลแบรนด์กำหนดไว้ จึงเข้าสู่ระบบคอนโซลไม่ได้ กรุณาติดต่อผู้ดูแลแบรนด์เพื่อเพิ่มชื่อของคุณ',
  oidc_credential_inactive: 'บัญชีนี้อยู่ในรายชื่อเจ้าหน้าที่ แต่สิทธิ์เข้าใช้ถูกเพิกถอนหรือแบรนด์ถูกระงับ กรุณาติดต่อผู้ดูแลแบรนด์',
  oidc_signed_in: 'เข้าสู่ระบบแล้ว กำลังไปยังคิวตรวจสอบ',
  oidc_continue: 'ไปยังคิวตรวจสอบ',
  oidc_start_again: 'เริ่มเข้าสู่ระบบใหม่',
} as const;

export const OIDC_EN: Record<keyof typeof OIDC_TH, string> = {
  oidc_heading: "Sign in with your organisation's account",
  oidc_not_configured: "This brand has not set up signing in with OpenID Connect. Ask for a sign-in link with npm run cli -- bo login, or ask the brand's administrator.",
  oidc_provider_unavailable: "The brand's sign-in provider cannot be reached just now. Please try again later.",
  oidc_refused: "This sign-in cannot go on: its 10 minutes are up, or the provider's answer does not match the request. Please start signing in again.",
  oidc_unmapped_heading: 'This account is not on the staff list',
  oidc_unmapped: "Your provider confirmed who you are, but your account is not on the staff list the brand's administrator keeps, so you cannot sign in to the console. Ask the brand's administrator to add you.",
  oidc_credential_inactive: "This account is on the staff list, but its access was revoked or the brand is suspended. Ask the brand's administrator.",
  oidc_signed_in: 'Signed in. On to the review queue.',
  oidc_continue: 'Go to the review queue',
  oidc_start_again: 'Start signing in again',
};
