#include "device/jit/cubin_identity.h"

#include <elf.h>

#include <cstring>

#include "common/error.h"
#include "common/sha256.h"

namespace qt::compile {

std::string cubin_digest(const std::vector<uint8_t>& cubin) { return Sha256().update(cubin.data(), cubin.size()).hex(); }

std::string code_digest(const std::vector<uint8_t>& cubin) {
  auto bad = [](const std::string& why) -> Error { return Error("malformed CUBIN: " + why, kExitFailure); };
  if (cubin.size() < sizeof(Elf64_Ehdr)) throw bad("shorter than an ELF header");
  Elf64_Ehdr eh;
  std::memcpy(&eh, cubin.data(), sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) throw bad("not ELF64");
  if (eh.e_shentsize != sizeof(Elf64_Shdr)) throw bad("unexpected section header size");
  const uint64_t table_end = eh.e_shoff + uint64_t(eh.e_shnum) * sizeof(Elf64_Shdr);
  if (eh.e_shoff > cubin.size() || table_end > cubin.size()) throw bad("section table outside the file");
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  if (eh.e_shnum) std::memcpy(sh.data(), cubin.data() + eh.e_shoff, eh.e_shnum * sizeof(Elf64_Shdr));
  if (eh.e_shstrndx >= eh.e_shnum) throw bad("no section name table");
  // offset + size could wrap around in a damaged header, so compare without adding.
  auto inside = [&](const Elf64_Shdr& s) { return s.sh_size <= cubin.size() && s.sh_offset <= cubin.size() - s.sh_size; };
  const Elf64_Shdr& names = sh[eh.e_shstrndx];
  if (!inside(names)) throw bad("section names outside the file");
  auto section_name = [&](const Elf64_Shdr& s) -> std::string {
    if (s.sh_name >= names.sh_size) throw bad("section name out of range");
    const char* p = reinterpret_cast<const char*>(cubin.data() + names.sh_offset + s.sh_name);
    return std::string(p, strnlen(p, names.sh_size - s.sh_name));
  };
  Sha256 h;
  h.field("code-v1");
  h.update(&eh.e_flags, sizeof eh.e_flags);  // carries the target architecture
  for (const Elf64_Shdr& s : sh) {
    if (s.sh_type == SHT_SYMTAB || s.sh_type == SHT_STRTAB) continue;
    std::string name = section_name(s);
    // ".text._Z3fooILi1EEvPf" -> ".text": the kernel name is the part that differs between points.
    for (const char* prefix : {".text.", ".nv.info.", ".nv.shared.", ".nv.constant0.", ".rel.text.",
                               ".rela.text.", ".nv.local.", ".nv.callgraph.", ".nv.prototype."}) {
      if (name.rfind(prefix, 0) == 0) {
        name = prefix;
        break;
      }
    }
    h.field(name);
    h.update(&s.sh_type, sizeof s.sh_type).update(&s.sh_flags, sizeof s.sh_flags).update(&s.sh_size, sizeof s.sh_size);
    if (s.sh_type != SHT_NOBITS && s.sh_size) {
      if (!inside(s)) throw bad("section " + name + " outside the file");
      h.update(cubin.data() + s.sh_offset, s.sh_size);
    }
  }
  return h.hex();
}

}  // namespace qt::compile
