// Entities described once (common/record.h): one field table gives the JSON and the schema, and
// reads the JSON back (common/record_json.h).
#include "common/record.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/record_json.h"

namespace gp {
namespace {

struct Gadget {
  std::string id;
  std::optional<std::string> owner;
  std::string state = "new";
  int64_t count = 0;
  std::optional<int64_t> limit;
  bool shared = false;
  int64_t created_at = 0;
  std::optional<int64_t> ended_at;
  std::string secret_hash;
};

constexpr std::array<std::string_view, 2> kGadgetStates = {"new", "old"};

}  // namespace

template <>
struct Fields<Gadget> {
  static constexpr auto list = std::tuple{
      Field{"id", &Gadget::id},
      Field{"owner", &Gadget::owner, "owner_id"},
      Field{"state", &Gadget::state, {}, Form::kEnum, kGadgetStates},
      Field{"count", &Gadget::count},
      Field{"limit", &Gadget::limit},
      Field{"shared", &Gadget::shared},
      Field{"created_at", &Gadget::created_at, {}, Form::kTime},
      Field{"ended_at", &Gadget::ended_at, {}, Form::kTime},
      Field{"secret_hash", &Gadget::secret_hash, {}, Form::kPlain, {}, Shown::kStoredOnly},
  };
};

namespace {

Gadget sample() {
  Gadget g;
  g.id = "gdg_1";
  g.owner = "usr_2";
  g.state = "old";
  g.count = 7;
  g.shared = true;
  g.created_at = 1'764'979'200'000'000;  // 2025-12-06T00:00:00Z
  g.secret_hash = "ab12";
  return g;
}

TEST(Record, TheJsonHasEveryShownFieldInItsFormAndNoStoredOnlyField) {
  const Json j = json_of_fields(sample());
  EXPECT_EQ(j, Json::parse(R"({"id": "gdg_1", "owner": "usr_2", "state": "old", "count": 7,
                              "limit": null, "shared": true,
                              "created_at": "2025-12-06T00:00:00.000000Z", "ended_at": null})"));
}

TEST(Record, TheTextWriterWritesTheSameObjectAsTheJsonWriter) {
  JsonText text;
  text.begin_object();
  describe_fields(sample(), text);
  text.end_object();
  EXPECT_EQ(Json::parse(std::move(text).take()), json_of_fields(sample()));
}

TEST(Record, TheSchemaRequiresEveryShownFieldAndAllowsNullOnlyForOptionalOnes) {
  const Json s = schema_of<Gadget>();
  EXPECT_EQ(s["additionalProperties"], false);
  EXPECT_EQ(s["required"], Json::parse(R"(["id", "owner", "state", "count", "limit", "shared",
                                            "created_at", "ended_at"])"));
  const Json& p = s["properties"];
  EXPECT_FALSE(p.contains("secret_hash"));
  EXPECT_EQ(p["id"], Json::parse(R"({"type": "string"})"));
  EXPECT_EQ(p["owner"], Json::parse(R"({"type": ["string", "null"]})"));
  EXPECT_EQ(p["state"], Json::parse(R"({"type": "string", "enum": ["new", "old"]})"));
  EXPECT_EQ(p["count"], Json::parse(R"({"type": "integer"})"));
  EXPECT_EQ(p["limit"], Json::parse(R"({"type": ["integer", "null"]})"));
  EXPECT_EQ(p["shared"], Json::parse(R"({"type": "boolean"})"));
  EXPECT_EQ(p["created_at"], Json::parse(R"({"type": "string", "format": "date-time"})"));
  EXPECT_EQ(p["ended_at"], Json::parse(R"({"type": ["string", "null"], "format": "date-time"})"));
}

// The kinds added for entities with enum members, label maps, fractions and values worked out
// from the record.
enum class Mood : uint8_t { kCalm, kCross };
constexpr std::array<std::string_view, 2> kMoods = {"calm", "cross"};
constexpr std::array<std::string_view, 2> kSizes = {"small", "large"};

struct Widget {
  Mood mood = Mood::kCalm;
  StringMap labels;
  double ratio = 0;
  int64_t size = 0;
};

}  // namespace

template <>
struct Fields<Widget> {
  static constexpr auto list = std::tuple{
      Field{"mood", &Widget::mood, {}, Form::kEnum, kMoods},
      Field{"labels", &Widget::labels},
      Field{"ratio", &Widget::ratio},
      Derived<Widget>{"size_class",
                      [](const Widget& w) { return std::string(kSizes[w.size > 10]); }, kSizes},
      Field{"size", &Widget::size},
  };
};

namespace {

TEST(Record, EnumsLabelMapsFractionsAndDerivedValuesAreWrittenAndDescribed) {
  const Widget w{Mood::kCross, {{"team", "ml"}, {"tier", "gold"}}, 0.25, 12};
  const Json j = json_of_fields(w);
  EXPECT_EQ(j, Json::parse(R"({"mood": "cross", "labels": {"team": "ml", "tier": "gold"},
                              "ratio": 0.25, "size_class": "large", "size": 12})"));
  JsonText text;
  text.begin_object();
  describe_fields(w, text);
  text.end_object();
  EXPECT_EQ(Json::parse(std::move(text).take()), j);

  const Json s = schema_of<Widget>();
  EXPECT_EQ(s["required"], Json::parse(R"(["mood", "labels", "ratio", "size_class", "size"])"));
  const Json& p = s["properties"];
  EXPECT_EQ(p["mood"], Json::parse(R"({"type": "string", "enum": ["calm", "cross"]})"));
  EXPECT_EQ(p["labels"],
            Json::parse(R"({"type": "object", "additionalProperties": {"type": "string"}})"));
  EXPECT_EQ(p["ratio"], Json::parse(R"({"type": "number"})"));
  EXPECT_EQ(p["size_class"], Json::parse(R"({"type": "string", "enum": ["small", "large"]})"));
}

struct Note {
  std::string tenant, detail;
  Json placement;  // null until placed
};

}  // namespace

template <>
struct Fields<Note> {
  static constexpr auto list = std::tuple{
      Field{"tenant", &Note::tenant, {}, Form::kNullIfEmpty},
      Field{"detail", &Note::detail, {}, Form::kJsonText},
      Field{"placement", &Note::placement, {}, Form::kNullIfEmpty},
  };
};

namespace {

TEST(Record, AnEmptyStringCanShowAsNullAndJsonTextShowsAsItsValue) {
  EXPECT_EQ(json_of_fields(Note{"", ""}),
            Json::parse(R"({"tenant": null, "detail": {}, "placement": null})"));
  EXPECT_EQ(json_of_fields(Note{"ten_1", R"({"a": [1]})", Json{{"gpus", 2}}}),
            Json::parse(R"({"tenant": "ten_1", "detail": {"a": [1]}, "placement": {"gpus": 2}})"));
  EXPECT_EQ(json_of_fields(Note{"t", "not json"}),
            Json::parse(R"({"tenant": "t", "detail": "not json", "placement": null})"));
  const Json p = schema_of<Note>()["properties"];
  EXPECT_EQ(p["tenant"], Json::parse(R"({"type": ["string", "null"]})"));
  EXPECT_EQ(p["detail"], Json::object());
  EXPECT_EQ(p["placement"], Json::parse(R"({"type": ["object", "null"]})"));
}

// Narrower integers, integers shown as their decimal text or as null when 0, string lists, and
// derived values that are not strings.
struct Tally {
  int64_t seq = 0;
  int32_t bps = 0;
  uint32_t uid = 0;
  StringList addresses;
  int milli = 0;
};

}  // namespace

template <>
struct Fields<Tally> {
  static constexpr auto list = std::tuple{
      Field{"id", &Tally::seq, "seq", Form::kDecimal},
      Field{"bps", &Tally::bps},
      Field{"uid", &Tally::uid},
      Field{"addresses", &Tally::addresses},
      Field{"milli", &Tally::milli, {}, Form::kNullIfEmpty},
      Derived<Tally, Json>{"shape",
                           [](const Tally& t) {
                             return Json{{"bps", t.bps}};
                           }},
      Derived<Tally, std::optional<Json>>{"share",
                                          [](const Tally& t) -> std::optional<Json> {
                                            if (t.milli == 0) return std::nullopt;
                                            return Json{{"milli", t.milli}};
                                          }},
      Derived<Tally, std::optional<int64_t>>{"limit",
                                             [](const Tally& t) -> std::optional<int64_t> {
                                               return t.uid ? std::optional<int64_t>(t.uid)
                                                            : std::nullopt;
                                             }},
  };
};

namespace {

TEST(Record, NarrowIntegersDecimalIdsListsAndDerivedValuesOfAnyKindAreWrittenAndDescribed) {
  const Tally t{42, -150, 4'000'000'000u, {"10.0.0.2", "fe80::1"}, 250};
  const Json j = json_of_fields(t);
  EXPECT_EQ(j, Json::parse(R"({"id": "42", "bps": -150, "uid": 4000000000,
                              "addresses": ["10.0.0.2", "fe80::1"], "milli": 250,
                              "shape": {"bps": -150}, "share": {"milli": 250},
                              "limit": 4000000000})"));
  JsonText text;
  text.begin_object();
  describe_fields(t, text);
  text.end_object();
  EXPECT_EQ(Json::parse(std::move(text).take()), j);
  EXPECT_EQ(json_of_fields(Tally{}), Json::parse(R"({"id": "0", "bps": 0, "uid": 0,
                                                     "addresses": [], "milli": null,
                                                     "shape": {"bps": 0}, "share": null,
                                                     "limit": null})"));
  const Json s = schema_of<Tally>();
  EXPECT_EQ(s["required"], Json::parse(R"(["id", "bps", "uid", "addresses", "milli", "shape",
                                            "share", "limit"])"));
  const Json& p = s["properties"];
  EXPECT_EQ(p["id"], Json::parse(R"({"type": "string"})"));
  EXPECT_EQ(p["bps"], Json::parse(R"({"type": "integer"})"));
  EXPECT_EQ(p["uid"], Json::parse(R"({"type": "integer"})"));
  EXPECT_EQ(p["addresses"], Json::parse(R"({"type": "array", "items": {"type": "string"}})"));
  EXPECT_EQ(p["milli"], Json::parse(R"({"type": ["integer", "null"]})"));
  EXPECT_EQ(p["shape"], Json::parse(R"({"type": "object"})"));
  EXPECT_EQ(p["share"], Json::parse(R"({"type": ["object", "null"]})"));
  EXPECT_EQ(p["limit"], Json::parse(R"({"type": ["integer", "null"]})"));
}

// Records nest: a record, an optional one and lists of records or integers inside another.
struct Slice {
  std::string profile;
  int start = 0;
};

struct Board {
  std::string id;
  std::vector<Slice> slices;
  std::optional<Slice> spare;
  std::vector<int> codes;
};

}  // namespace

template <>
struct Fields<Slice> {
  static constexpr auto list = std::tuple{
      Field{"profile", &Slice::profile},
      Field{"start", &Slice::start},
  };
};

template <>
struct Fields<Board> {
  static constexpr auto list = std::tuple{
      Field{"id", &Board::id},
      Field{"slices", &Board::slices},
      Derived<Board, std::optional<Slice>>{"spare", [](const Board& b) { return b.spare; }},
      Derived<Board, Slice>{
          "first", [](const Board& b) { return b.slices.empty() ? Slice{} : b.slices[0]; }},
      Field{"codes", &Board::codes},
  };
};

namespace {

TEST(Record, RecordsAndListsOfRecordsOrIntegersNestWithTheirOwnStrictSchemas) {
  const Board b{"brd_1", {{"1g.18gb", 0}, {"3g.71gb", 4}}, std::nullopt, {48, 79}};
  const Json j = json_of_fields(b);
  EXPECT_EQ(j, Json::parse(R"({"id": "brd_1",
                              "slices": [{"profile": "1g.18gb", "start": 0},
                                         {"profile": "3g.71gb", "start": 4}],
                              "spare": null, "first": {"profile": "1g.18gb", "start": 0},
                              "codes": [48, 79]})"));
  Board with_spare = b;
  with_spare.spare = Slice{"7g.141gb", 0};
  EXPECT_EQ(json_of_fields(with_spare)["spare"],
            Json::parse(R"({"profile": "7g.141gb", "start": 0})"));
  JsonText text;
  text.begin_object();
  describe_fields(b, text);
  text.end_object();
  EXPECT_EQ(Json::parse(std::move(text).take()), j);
  const Json slice = Json::parse(R"({"type": "object",
      "properties": {"profile": {"type": "string"}, "start": {"type": "integer"}},
      "required": ["profile", "start"], "additionalProperties": false})");
  EXPECT_EQ(schema_of<Slice>(), slice);
  const Json board = schema_of<Board>();
  const Json& p = board["properties"];
  EXPECT_EQ(p["slices"], (Json{{"type", "array"}, {"items", slice}}));
  Json nullable = slice;
  nullable["type"] = Json::array({"object", "null"});
  EXPECT_EQ(p["spare"], nullable);
  EXPECT_EQ(p["first"], slice);
  EXPECT_EQ(p["codes"], Json::parse(R"({"type": "array", "items": {"type": "integer"}})"));
}

// Entries shown only where they apply (Shown::kWhereSet): left out of the JSON when absent or
// empty, listed in the schema without null and not required.
struct Tier {
  int64_t from = 0;
  std::optional<int64_t> to;
  std::string note;
  std::vector<Slice> parts;
  std::optional<int64_t> ended_at;
  bool closed = false;
};

}  // namespace

template <>
struct Fields<Tier> {
  static constexpr auto list = std::tuple{
      Field{"from", &Tier::from},
      Field{"to", &Tier::to, {}, Form::kPlain, {}, Shown::kWhereSet},
      Field{"note", &Tier::note, {}, Form::kPlain, {}, Shown::kWhereSet},
      Field{"parts", &Tier::parts, {}, Form::kPlain, {}, Shown::kWhereSet},
      Field{"ended_at", &Tier::ended_at, {}, Form::kTime, {}, Shown::kWhereSet},
      Derived<Tier, std::optional<std::string>>{"why",
                                                [](const Tier& t) -> std::optional<std::string> {
                                                  if (!t.closed) return std::nullopt;
                                                  return t.note;
                                                },
                                                {},
                                                Form::kPlain,
                                                Shown::kWhereSet},
  };
};

namespace {

TEST(Record, AnEntryShownWhereItAppliesIsLeftOutWhenAbsentOrEmptyAndNotRequired) {
  EXPECT_EQ(json_of_fields(Tier{}), Json::parse(R"({"from": 0})"));
  // A closed tier with an empty note: "why" applies (a value, though empty), "note" does not.
  const Tier t{5, 10, "", {{"1g.18gb", 0}}, 1'764'979'200'000'000, true};
  const Json j = json_of_fields(t);
  EXPECT_EQ(j, Json::parse(R"({"from": 5, "to": 10, "parts": [{"profile": "1g.18gb", "start": 0}],
                              "ended_at": "2025-12-06T00:00:00.000000Z", "why": ""})"));
  JsonText text;
  text.begin_object();
  describe_fields(t, text);
  text.end_object();
  EXPECT_EQ(Json::parse(std::move(text).take()), j);
  const Json s = schema_of<Tier>();
  EXPECT_EQ(s["required"], Json::parse(R"(["from"])"));
  const Json& p = s["properties"];
  EXPECT_EQ(p["to"], Json::parse(R"({"type": "integer"})"));
  EXPECT_EQ(p["note"], Json::parse(R"({"type": "string"})"));
  EXPECT_EQ(p["parts"]["type"], "array");
  EXPECT_EQ(p["ended_at"], Json::parse(R"({"type": "string", "format": "date-time"})"));
  EXPECT_EQ(p["why"], Json::parse(R"({"type": "string"})"));
}

TEST(Record, NeverNullDropsNullFromTheTypesAndTheEnumValues) {
  EXPECT_EQ(never_null(Json::parse(R"({"type": ["string", "null"], "enum": ["a", null]})")),
            Json::parse(R"({"type": "string", "enum": ["a"]})"));
  EXPECT_EQ(never_null(Json::parse(R"({"type": ["integer", "string", "null"]})")),
            Json::parse(R"({"type": ["integer", "string"]})"));
  EXPECT_EQ(never_null(Json::object()), Json::object());
}

// A member type with a text form of its own shows as that text.
struct Span {
  int first = 0, last = 0;
};
struct Route {
  Span span;
};

}  // namespace

template <>
struct TextForm<Span> {
  static std::string text(const Span& s) { return fmt::format("{}-{}", s.first, s.last); }
  static Result<Span> parse(std::string_view text) {
    Span s;
    if (std::sscanf(std::string(text).c_str(), "%d-%d", &s.first, &s.last) != 2)
      return fail(Error::invalid("not first-last"));
    return s;
  }
};

template <>
struct Fields<Route> {
  static constexpr auto list = std::tuple{Field{"span", &Route::span}};
};

namespace {

TEST(Record, AMemberWithATextFormShowsAsItsText) {
  static_assert(TextMember<Span>);
  static_assert(!TextMember<Slice>);
  EXPECT_EQ(json_of_fields(Route{{10, 20}}), Json::parse(R"({"span": "10-20"})"));
  EXPECT_EQ(schema_of<Route>()["properties"]["span"], Json::parse(R"({"type": "string"})"));
}

// A member type with a JSON form of its own shows as that value, with the schema its form gives;
// lists of such values, or of values with a text form, show as arrays of their forms.
struct Level {
  int low = 0, high = 0;
};
struct Gauge {
  Level level;
  std::vector<Level> levels;
  std::vector<Span> spans;
};

}  // namespace

template <>
struct JsonForm<Level> {
  static Json json(const Level& l) {
    if (l.low == l.high) return l.low;
    return fmt::format("{}-{}", l.low, l.high);
  }
  static Json schema() { return {{"type", {"integer", "string"}}}; }
};

template <>
struct Fields<Gauge> {
  static constexpr auto list = std::tuple{
      Field{"level", &Gauge::level},
      Field{"levels", &Gauge::levels},
      Field{"spans", &Gauge::spans},
  };
};

namespace {

TEST(Record, AMemberWithAJsonFormShowsAsItsValueAndListsShowTheirForms) {
  static_assert(JsonFormMember<Level>);
  static_assert(!JsonFormMember<Span>);
  const Gauge g{{3, 3}, {{80, 80}, {8000, 8099}}, {{1, 2}}};
  const Json j = json_of_fields(g);
  EXPECT_EQ(j, Json::parse(R"({"level": 3, "levels": [80, "8000-8099"], "spans": ["1-2"]})"));
  JsonText text;
  text.begin_object();
  describe_fields(g, text);
  text.end_object();
  EXPECT_EQ(Json::parse(std::move(text).take()), j);
  const Json p = schema_of<Gauge>()["properties"];
  EXPECT_EQ(p["level"], Json::parse(R"({"type": ["integer", "string"]})"));
  EXPECT_EQ(p["levels"],
            Json::parse(R"({"type": "array", "items": {"type": ["integer", "string"]}})"));
  EXPECT_EQ(p["spans"], Json::parse(R"({"type": "array", "items": {"type": "string"}})"));
}

TEST(Record, EnumNamesRoundTripAndAnUnknownNameIsNone) {
  EXPECT_EQ(enum_name(Mood::kCross, kMoods), "cross");
  EXPECT_EQ(enum_name(static_cast<Mood>(7), kMoods), "");
  EXPECT_EQ(parse_enum<Mood>("calm", kMoods), Mood::kCalm);
  EXPECT_EQ(parse_enum<Mood>("Calm", kMoods), std::nullopt);
}

TEST(Record, TheTextWriterWritesAnyJsonValueAndReplacesInvalidUtf8) {
  JsonText text;
  text.begin_object();
  text.json("a", Json::parse(R"({"x": [1, 2.5, null]})"));
  text.json("b", Json(std::string("bad \xff byte")));
  text.end_object();
  const Json back = Json::parse(std::move(text).take());
  EXPECT_EQ(back["a"], Json::parse(R"({"x": [1, 2.5, null]})"));
  EXPECT_EQ(back["b"], "bad \xef\xbf\xbd byte");
}

// A value that stands for members of the record is read back through Derived::set.
struct Ticket {
  std::string card_id;
  int64_t card_version = 0;
};

}  // namespace

template <>
struct Fields<Ticket> {
  static constexpr auto list = std::tuple{
      Derived<Ticket, Slice>{.name = "card",
                             .get =
                                 [](const Ticket& t) {
                                   return Slice{t.card_id, int(t.card_version)};
                                 },
                             .set =
                                 [](Ticket& t, Slice s) {
                                   t.card_id = std::move(s.profile);
                                   t.card_version = s.start;
                                 }},
  };
};

namespace {

// What a read gives, or its error's message.
template <typename R>
std::string read_error(const char* text) {
  auto r = record_from_json<R>(Json::parse(text));
  return r ? std::string("read") : r.error().message;
}

TEST(RecordJson, ARecordReadsBackWhatItsTableWrote) {
  const Gadget g = sample();
  const auto back = record_from_json<Gadget>(json_of_fields(g));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(json_of_fields(*back), json_of_fields(g));
  EXPECT_EQ(back->secret_hash, "");  // stored only: never in the JSON
  for (const Tally& t : {Tally{42, -150, 4'000'000'000u, {"10.0.0.2", "fe80::1"}, 250}, Tally{}}) {
    const auto tally = record_from_json<Tally>(json_of_fields(t));
    ASSERT_TRUE(tally) << tally.error().message;
    EXPECT_EQ(json_of_fields(*tally), json_of_fields(t));
  }
  const Board b{"brd_1", {{"1g.18gb", 0}, {"3g.71gb", 4}}, Slice{"7g.141gb", 0}, {48, 79}};
  const auto board = record_from_json<Board>(json_of_fields(b));
  ASSERT_TRUE(board) << board.error().message;
  EXPECT_EQ(board->slices.size(), 2U);
  EXPECT_EQ(board->slices[1].profile, "3g.71gb");
  EXPECT_EQ(board->codes, (std::vector<int>{48, 79}));
  EXPECT_FALSE(board->spare);  // derived, with no way back: passed by
  const Route route{{10, 20}};
  const auto span = record_from_json<Route>(json_of_fields(route));
  ASSERT_TRUE(span) << span.error().message;
  EXPECT_EQ(json_of_fields(*span), json_of_fields(route));
  const auto ticket = record_from_json<Ticket>(json_of_fields(Ticket{"rc_1", 3}));
  ASSERT_TRUE(ticket) << ticket.error().message;
  EXPECT_EQ(ticket->card_id, "rc_1");
  EXPECT_EQ(ticket->card_version, 3);
}

TEST(RecordJson, AMissingKeyKeepsItsDefaultAndAKeyTheTableDoesNotNameIsPassedBy) {
  const auto g = record_from_json<Gadget>(Json::parse(R"({"id": "gdg_9", "total": "1.00"})"));
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_EQ(g->id, "gdg_9");
  EXPECT_EQ(g->state, "new");
  EXPECT_EQ(g->count, 0);
  EXPECT_FALSE(g->owner);
  const auto t = record_from_json<Tally>(Json::parse(R"({"milli": null})"));
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->milli, 0);
}

TEST(RecordJson, AValueOfTheWrongTypeOrFormFailsTheReadNamingWhereItIs) {
  EXPECT_EQ(read_error<Gadget>("[]"), "the document: want an object");
  EXPECT_EQ(read_error<Gadget>(R"({"count": "7"})"), "count: want an integer");
  EXPECT_EQ(read_error<Gadget>(R"({"state": "mint"})"), "state: want one of new, old");
  EXPECT_EQ(read_error<Gadget>(R"({"created_at": "yesterday"})"),
            "created_at: want an RFC 3339 time");
  EXPECT_EQ(read_error<Gadget>(R"({"shared": 1})"), "shared: want true or false");
  EXPECT_EQ(read_error<Tally>(R"({"id": "4x"})"), "id: want decimal digits");
  EXPECT_EQ(read_error<Tally>(R"({"bps": 4000000000})"),
            "bps: want an integer in its member's range");
  EXPECT_EQ(read_error<Tally>(R"({"uid": -1})"), "uid: want an integer in its member's range");
  EXPECT_EQ(read_error<Tally>(R"({"addresses": ["a", 2]})"), "addresses[1]: want a string");
  EXPECT_EQ(read_error<Board>(R"({"slices": [{"start": 0}, {"start": "x"}]})"),
            "slices[1].start: want an integer");
  EXPECT_EQ(read_error<Board>(R"({"codes": {}})"), "codes: want an array");
  EXPECT_EQ(read_error<Ticket>(R"({"card": {"profile": 7}})"), "card.profile: want a string");
  EXPECT_EQ(read_error<Route>(R"({"span": "x"})"), "span: not first-last");
}

}  // namespace
}  // namespace gp
